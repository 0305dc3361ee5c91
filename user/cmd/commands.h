/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* One entry point per subcommand; each returns the process exit status. */
#ifndef MEMTRAIL_COMMANDS_H
#define MEMTRAIL_COMMANDS_H

int cmd_record(int argc, char **argv);
int cmd_watch(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_mark(int argc, char **argv);
int cmd_top(int argc, char **argv);
int cmd_daemonset(int argc, char **argv);
int cmd_features(int argc, char **argv);
/* The workload 'memtrail demo' records (hidden subcommand). */
int cmd_demo_workload(int argc, char **argv);

#endif
