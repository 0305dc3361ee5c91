import os, subprocess, time, signal, sys
sys.path.insert(0, "/work/main/tests/integration")
from harness import *
bg = Background(["record", "-o", "/tmp/m/t2.json", "--", workload("cuda_phases"), "--wait"],
                stdin=subprocess.PIPE, env=dict(os.environ, MEMTRAIL_NO_FIND_VMA="1"))
kids = [int(x) for x in open(f"/proc/{bg.proc.pid}/task/{bg.proc.pid}/children").read().split()]
print(kids, [open(f"/proc/{k}/comm").read().strip() for k in kids])
wl = [k for k in kids if open(f"/proc/{k}/comm").read().strip() == "cuda_phases"][0]
print("state before", proc_state(wl), open(f"/proc/{wl}/wchan").read())
bg.proc.send_signal(signal.SIGSTOP); wait_stopped(bg.proc.pid); time.sleep(3.2)
bg.proc.stdin.write("g"); bg.proc.stdin.flush()
time.sleep(2)
print("state after", proc_state(wl), open(f"/proc/{wl}/wchan").read(), open(f"/proc/{wl}/stack").read() if os.path.exists(f"/proc/{wl}/stack") else "")
bg.proc.send_signal(signal.SIGCONT)
bg.proc.stdin.close()
print(bg.proc.wait(timeout=60)); print(bg.proc.stderr.read()[-2000:])
