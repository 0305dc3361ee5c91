// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Neuron runtime calls, through the libnrt.so.1 stand-in, in the automatic
 * phases memtrail finds (MiB; DEVICE tensors are neuron_device, HOST and
 * VIRTUAL ones neuron_host):
 *   start         nothing
 *   runtime_init  nrt_init; device +4 (t1, vnc 0), host +1 (t2, VIRTUAL)
 *   model_load    nrt_load, nrt_load_collectives; device +32 (t3, vnc 1),
 *                 host +2 (t4, HOST), a slice of t3 (no bytes), device -4 (t1)
 *   execute       nrt_execute, nrt_execute_repeat; device +8 -8 (t5), the
 *                 slice freed (no bytes), an injected OOM of 2 GiB on vnc 1,
 *                 then t2, t3 and t4 freed
 * Prints the ledger, the OOM and the tensors live at the OOM as JSON.
 *   nrt_phases [--wait]
 */
#include <stdint.h>

#include "common.h"
#include "ledger.h"

typedef struct nrt_model nrt_model_t;
typedef struct nrt_tensor nrt_tensor_t;
typedef void nrt_tensor_set_t;
typedef enum {
	NRT_TENSOR_PLACEMENT_DEVICE,
	NRT_TENSOR_PLACEMENT_HOST,
	NRT_TENSOR_PLACEMENT_VIRTUAL,
} nrt_tensor_placement_t;
typedef enum {
	NRT_FRAMEWORK_TYPE_INVALID = 0,
	NRT_FRAMEWORK_TYPE_NO_FW = 1,
} nrt_framework_type_t;
typedef int NRT_STATUS;

NRT_STATUS nrt_init(nrt_framework_type_t framework, const char *fw_version, const char *fal_version);
void nrt_close(void);
NRT_STATUS nrt_load(const void *neff_bytes, size_t size, int32_t vnc, int32_t vnc_count,
		    nrt_model_t **model);
NRT_STATUS nrt_load_collectives(const void *neff_bytes, size_t size, int32_t vnc, int32_t vnc_count,
				uint32_t ctx_device_id, uint32_t ctx_device_count, nrt_model_t **model);
NRT_STATUS nrt_unload(nrt_model_t *model);
NRT_STATUS nrt_execute(nrt_model_t *model, const nrt_tensor_set_t *input_set,
		       nrt_tensor_set_t *output_set);
NRT_STATUS nrt_execute_repeat(nrt_model_t *model, const nrt_tensor_set_t *input_set,
			      nrt_tensor_set_t *output_set, int repeat_count);
NRT_STATUS nrt_tensor_allocate(nrt_tensor_placement_t tensor_placement, int vnc, size_t size,
			       const char *name, nrt_tensor_t **tensor);
void nrt_tensor_free(nrt_tensor_t **tensor);
NRT_STATUS nrt_tensor_allocate_slice(const nrt_tensor_t *tensor_source, size_t offset, size_t size,
				     const char *name, nrt_tensor_t **tensor_slice);
int standin_fail_next(int n);
typedef struct nrt_vnc_memory_stats {
	size_t bytes_used;
	size_t bytes_limit;
} nrt_vnc_memory_stats_t;
NRT_STATUS nrt_get_vnc_memory_stats(uint32_t vnc, nrt_vnc_memory_stats_t *stats, size_t stats_size_in,
				    size_t *stats_size_out);

#define OOM_SIZE (2UL << 30)
#define OOM_VNC 1

/* Not a real NEFF: the stand-in only wants bytes. */
static const unsigned char neff[4096] = { 'N', 'E', 'F', 'F' };

static struct jbuf out, live_at_oom;

/* Allocate a tensor and count it (freed with tensor_free, below). */
static nrt_tensor_t *tensor(nrt_tensor_placement_t placement, int vnc, size_t size, const char *name)
{
	nrt_tensor_t *t;

	MUST(nrt_tensor_allocate(placement, vnc, size, name, &t));
	ledger_alloc(placement == NRT_TENSOR_PLACEMENT_DEVICE ? LK_NEURON_DEVICE : LK_NEURON_HOST,
		     t, (long long)size);
	return t;
}

static void tensor_free(nrt_tensor_t **t)
{
	ledger_free(*t);
	nrt_tensor_free(t);
	if (*t) {
		dprintf(2, "nrt_phases: nrt_tensor_free left the pointer set\n");
		exit(1);
	}
}

int main(int argc, char **argv)
{
	nrt_tensor_t *t1, *t2, *t3, *t4, *t5, *slice;
	nrt_model_t *model, *coll;
	NRT_STATUS oom_rc;
	nrt_vnc_memory_stats_t stats;
	size_t stats_len = 0;

	wait_go(argc, argv);

	ledger_phase("runtime_init");
	MUST(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""));
	/* the size of the core the OOM will come on, as the runtime tells it */
	MUST(nrt_get_vnc_memory_stats(OOM_VNC, &stats, sizeof(stats), &stats_len));
	t1 = tensor(NRT_TENSOR_PLACEMENT_DEVICE, 0, 4 * MiB, "t1");
	t2 = tensor(NRT_TENSOR_PLACEMENT_VIRTUAL, 0, 1 * MiB, "t2");

	ledger_phase("model_load");
	MUST(nrt_load(neff, sizeof(neff), 0, 1, &model));
	MUST(nrt_load_collectives(neff, sizeof(neff), 1, 1, 0, 1, &coll));
	t3 = tensor(NRT_TENSOR_PLACEMENT_DEVICE, 1, 32 * MiB, "t3");
	t4 = tensor(NRT_TENSOR_PLACEMENT_HOST, 0, 2 * MiB, "t4");
	/* a view of t3's storage: no bytes of its own */
	MUST(nrt_tensor_allocate_slice(t3, MiB, 4 * MiB, "t3_slice", &slice));
	tensor_free(&t1);

	ledger_phase("execute");
	MUST(nrt_execute(model, NULL, NULL));
	MUST(nrt_execute_repeat(model, NULL, NULL, 2));
	t5 = tensor(NRT_TENSOR_PLACEMENT_DEVICE, 1, 8 * MiB, "t5");
	tensor_free(&t5);
	nrt_tensor_free(&slice);

	ledger_live_json(&live_at_oom);
	standin_fail_next(1);
	oom_rc = nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, OOM_VNC, OOM_SIZE, "oom", &t5);
	if (oom_rc != 4) {
		dprintf(2, "nrt_phases: the injected OOM returned %d\n", oom_rc);
		exit(1);
	}

	tensor_free(&t2);
	tensor_free(&t3);
	tensor_free(&t4);
	MUST(nrt_unload(coll));
	MUST(nrt_unload(model));
	nrt_close();

	jb_printf(&out, "{");
	ledger_json(&out);
	jb_printf(&out, ", \"device_totals\": [{\"device\": %d, \"bytes\": %zu}]", OOM_VNC,
		  stats.bytes_limit);
	jb_printf(&out, ", \"oom\": {\"function\": \"nrt_tensor_allocate\", \"rc\": %d, \"size\": %lu, "
		  "\"device\": %d, \"phase\": \"%s\", \"kind\": \"neuron_device\"}, \"live_at_oom\": %.*s}\n",
		  oom_rc, OOM_SIZE, OOM_VNC, ledger_current(), (int)live_at_oom.len, live_at_oom.s);
	jb_write(&out);
	return 0;
}
