// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * A stand-in for the AWS Neuron runtime (libnrt.so.1) for memtrail's tests,
 * on machines without a Neuron device. Names, prototypes and status codes
 * are those of the SDK's nrt.h and nrt_status.h. A tensor's storage is host
 * memory from malloc, never touched (virtual size, no RSS), shared and
 * reference counted with its slices.
 *
 * Each export does its own work with static helpers and never calls
 * another export: one API call enters exactly one probed function.
 *
 * Failure control for the tests:
 *   standin_fail_next(n)       the next n nrt_tensor_allocate / nrt_load /
 *                              nrt_load_collectives calls return NRT_RESOURCE
 *   STANDIN_FAIL_ABOVE=bytes   any tensor larger than that: NRT_RESOURCE
 */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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
	NRT_FRAMEWORK_TYPE_TENSORFLOW,
	NRT_FRAMEWORK_TYPE_PYTORCH,
	NRT_FRAMEWORK_TYPE_MXNET,
	NRT_FRAMEWORK_TYPE_PRECHECK,
} nrt_framework_type_t;

typedef enum {
	NRT_SUCCESS = 0,
	NRT_FAILURE = 1,
	NRT_INVALID = 2,
	NRT_INVALID_HANDLE = 3,
	NRT_RESOURCE = 4,
	NRT_TIMEOUT = 5,
	NRT_HW_ERROR = 6,
	NRT_QUEUE_FULL = 7,
	NRT_LOAD_NOT_ENOUGH_NC = 9,
	NRT_UNSUPPORTED_NEFF_VERSION = 10,
	NRT_FAIL_HOST_MEM_ALLOC = 11,
	NRT_UNINITIALIZED = 13,
	NRT_CLOSED = 14,
	NRT_QUEUE_EMPTY = 15,
	NRT_EXEC_UNIT_UNRECOVERABLE = 101,
	NRT_EXEC_BAD_INPUT = 1002,
	NRT_EXEC_COMPLETED_WITH_NUM_ERR = 1003,
	NRT_EXEC_COMPLETED_WITH_ERR = 1004,
	NRT_EXEC_NC_BUSY = 1005,
	NRT_EXEC_OOB = 1006,
	NRT_COLL_PENDING = 1100,
	NRT_EXEC_HW_ERR_COLLECTIVES = 1200,
	NRT_EXEC_HW_ERR_HBM_UE = 1201,
	NRT_EXEC_HW_ERR_NC_UE = 1202,
	NRT_EXEC_HW_ERR_DMA_ABORT = 1203,
	NRT_EXEC_SW_NQ_OVERFLOW = 1204,
	NRT_EXEC_HW_ERR_REPAIRABLE_HBM_UE = 1205,
	NRT_NETWORK_PROXY_FAILURE = 1206,
} NRT_STATUS;

_Static_assert(sizeof(nrt_tensor_placement_t) == 4, "placement is an int-sized enum");
_Static_assert(sizeof(NRT_STATUS) == 4, "NRT_STATUS is an int-sized enum");

#define NVNC 2

#define NRTAPI __attribute__((visibility("default")))
#define VNC_MEMORY (16ULL << 30)	/* what nrt_get_vnc_memory_stats reports as the limit */

static int initialized;
static int fail_pending;		/* standin_fail_next() */
static size_t fail_above = SIZE_MAX;	/* STANDIN_FAIL_ABOVE */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

struct nrt_model {
	int32_t vnc;
	int32_t vnc_count;
	struct nrt_model *next;
};

static struct nrt_model *models;

/* Storage shared by a tensor and its slices; freed with the last of them. */
struct storage {
	void *buf;
	size_t size;
	int refs;
};

struct nrt_tensor {
	struct storage *st;
	size_t offset;			/* into st->buf: non-zero for slices */
	size_t size;
	nrt_tensor_placement_t placement;
	int vnc;
	char name[64];
};

__attribute__((constructor)) static void standin_setup(void)
{
	const char *s = getenv("STANDIN_FAIL_ABOVE");
	unsigned long long v;
	char *end;

	if (!s || !*s)
		return;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (!errno && !*end)
		fail_above = (size_t)v;
}

NRTAPI int standin_fail_next(int n)
{
	return __atomic_exchange_n(&fail_pending, n > 0 ? n : 0, __ATOMIC_SEQ_CST);
}

static int is_init(void)
{
	return __atomic_load_n(&initialized, __ATOMIC_ACQUIRE);
}

static int take_failure(void)
{
	int n = __atomic_load_n(&fail_pending, __ATOMIC_SEQ_CST);

	while (n > 0)
		if (__atomic_compare_exchange_n(&fail_pending, &n, n - 1, 0,
						__ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
			return 1;
	return 0;
}

static void set_name(struct nrt_tensor *t, const char *name)
{
	if (name)
		strncpy(t->name, name, sizeof(t->name) - 1);
}

NRTAPI NRT_STATUS nrt_init(nrt_framework_type_t framework, const char *fw_version,
			   const char *fal_version)
{
	(void)fw_version;
	(void)fal_version;
	if (framework <= NRT_FRAMEWORK_TYPE_INVALID || framework > NRT_FRAMEWORK_TYPE_PRECHECK)
		return NRT_INVALID;
	__atomic_store_n(&initialized, 1, __ATOMIC_RELEASE);
	return NRT_SUCCESS;
}

NRTAPI void nrt_close(void)
{
	__atomic_store_n(&initialized, 0, __ATOMIC_RELEASE);
}

static NRT_STATUS model_load(const void *neff_bytes, size_t size, int32_t vnc, int32_t vnc_count,
			     nrt_model_t **model)
{
	struct nrt_model *m;

	if (!is_init())
		return NRT_UNINITIALIZED;
	if (!neff_bytes || !size || !model)
		return NRT_INVALID;
	/* vnc_count -1: all the cores from vnc on */
	if (vnc < 0 || vnc >= NVNC || vnc_count == 0 || vnc_count < -1 || vnc_count > NVNC - vnc)
		return NRT_LOAD_NOT_ENOUGH_NC;
	if (take_failure())
		return NRT_RESOURCE;
	m = calloc(1, sizeof(*m));
	if (!m)
		return NRT_RESOURCE;
	m->vnc = vnc;
	m->vnc_count = vnc_count < 0 ? NVNC - vnc : vnc_count;
	pthread_mutex_lock(&lock);
	m->next = models;
	models = m;
	pthread_mutex_unlock(&lock);
	*model = m;
	return NRT_SUCCESS;
}

NRTAPI NRT_STATUS nrt_load(const void *neff_bytes, size_t size, int32_t vnc, int32_t vnc_count,
			   nrt_model_t **model)
{
	return model_load(neff_bytes, size, vnc, vnc_count, model);
}

NRTAPI NRT_STATUS nrt_load_collectives(const void *neff_bytes, size_t size, int32_t vnc,
				       int32_t vnc_count, uint32_t ctx_device_id,
				       uint32_t ctx_device_count, nrt_model_t **model)
{
	if (is_init() && ctx_device_id >= ctx_device_count)
		return NRT_INVALID;
	return model_load(neff_bytes, size, vnc, vnc_count, model);
}

/* Whether the model is loaded (callers hold the lock). */
static int model_live(const nrt_model_t *model)
{
	struct nrt_model *m;

	for (m = models; m; m = m->next)
		if (m == model)
			return 1;
	return 0;
}

NRTAPI NRT_STATUS nrt_unload(nrt_model_t *model)
{
	struct nrt_model **pm;

	if (!is_init())
		return NRT_UNINITIALIZED;
	pthread_mutex_lock(&lock);
	for (pm = &models; *pm && *pm != model; pm = &(*pm)->next)
		;
	if (!model || !*pm) {
		pthread_mutex_unlock(&lock);
		return NRT_INVALID_HANDLE;
	}
	*pm = model->next;
	pthread_mutex_unlock(&lock);
	free(model);
	return NRT_SUCCESS;
}

/* Nothing runs: a loaded model "executes" at once, whatever the tensor sets. */
static NRT_STATUS run(const nrt_model_t *model)
{
	int live;

	if (!is_init())
		return NRT_UNINITIALIZED;
	pthread_mutex_lock(&lock);
	live = model && model_live(model);
	pthread_mutex_unlock(&lock);
	return live ? NRT_SUCCESS : NRT_INVALID_HANDLE;
}

NRTAPI NRT_STATUS nrt_execute(nrt_model_t *model, const nrt_tensor_set_t *input_set,
			      nrt_tensor_set_t *output_set)
{
	(void)input_set;
	(void)output_set;
	return run(model);
}

NRTAPI NRT_STATUS nrt_execute_repeat(nrt_model_t *model, const nrt_tensor_set_t *input_set,
				     nrt_tensor_set_t *output_set, int repeat_count)
{
	(void)input_set;
	(void)output_set;
	if (is_init() && repeat_count < 1)
		return NRT_INVALID;
	return run(model);
}

NRTAPI NRT_STATUS nrt_tensor_allocate(nrt_tensor_placement_t tensor_placement, int vnc, size_t size,
				      const char *name, nrt_tensor_t **tensor)
{
	struct nrt_tensor *t;
	struct storage *st;

	if (!is_init())
		return NRT_UNINITIALIZED;
	if (!tensor || !size || vnc < 0 || vnc >= NVNC ||
	    tensor_placement < NRT_TENSOR_PLACEMENT_DEVICE ||
	    tensor_placement > NRT_TENSOR_PLACEMENT_VIRTUAL)
		return NRT_INVALID;
	if (size > fail_above || take_failure())
		return NRT_RESOURCE;
	t = calloc(1, sizeof(*t));
	st = malloc(sizeof(*st));
	/* not touched: the tests want virtual size, not RSS */
	if (t && st)
		st->buf = malloc(size);
	if (!t || !st || !st->buf) {
		free(t);
		free(st);
		return NRT_RESOURCE;
	}
	st->size = size;
	st->refs = 1;
	t->st = st;
	t->size = size;
	t->placement = tensor_placement;
	t->vnc = vnc;
	set_name(t, name);
	*tensor = t;
	return NRT_SUCCESS;
}

/* A view of the source's storage: no new memory, one more reference to it. */
NRTAPI NRT_STATUS nrt_tensor_allocate_slice(const nrt_tensor_t *tensor_source, size_t offset,
					    size_t size, const char *name,
					    nrt_tensor_t **tensor_slice)
{
	struct nrt_tensor *t;

	if (!is_init())
		return NRT_UNINITIALIZED;
	if (!tensor_source || !tensor_slice || !size || offset > tensor_source->size ||
	    size > tensor_source->size - offset)
		return NRT_INVALID;
	t = calloc(1, sizeof(*t));
	if (!t)
		return NRT_RESOURCE;
	__atomic_add_fetch(&tensor_source->st->refs, 1, __ATOMIC_SEQ_CST);
	t->st = tensor_source->st;
	t->offset = tensor_source->offset + offset;
	t->size = size;
	t->placement = tensor_source->placement;
	t->vnc = tensor_source->vnc;
	set_name(t, name);
	*tensor_slice = t;
	return NRT_SUCCESS;
}

NRTAPI void nrt_tensor_free(nrt_tensor_t **tensor)
{
	struct nrt_tensor *t;

	if (!tensor || !*tensor)
		return;
	t = *tensor;
	if (!__atomic_sub_fetch(&t->st->refs, 1, __ATOMIC_SEQ_CST)) {
		free(t->st->buf);
		free(t->st);
	}
	free(t);
	*tensor = NULL;
}

NRTAPI size_t nrt_tensor_get_size(const nrt_tensor_t *tensor)
{
	return tensor ? tensor->size : 0;
}

NRTAPI void *nrt_tensor_get_va(const nrt_tensor_t *tensor)
{
	return tensor ? (char *)tensor->st->buf + tensor->offset : NULL;
}

NRTAPI NRT_STATUS nrt_get_total_vnc_count(uint32_t *vnc_count)
{
	if (!vnc_count)
		return NRT_INVALID;
	*vnc_count = NVNC;
	return NRT_SUCCESS;
}

typedef struct nrt_vnc_memory_stats {
	size_t bytes_used;
	size_t bytes_limit;
} nrt_vnc_memory_stats_t;

/* Every virtual core of the stand-in has VNC_MEMORY bytes; "used" is not kept per core. */
NRTAPI NRT_STATUS nrt_get_vnc_memory_stats(uint32_t vnc, nrt_vnc_memory_stats_t *stats,
					  size_t stats_size_in, size_t *stats_size_out)
{
	nrt_vnc_memory_stats_t st = { 0, VNC_MEMORY };

	if (!is_init())
		return NRT_INVALID;
	if (!stats || vnc >= NVNC)
		return NRT_INVALID;
	if (stats_size_in > sizeof(st))
		stats_size_in = sizeof(st);
	memcpy(stats, &st, stats_size_in);
	if (stats_size_out)
		*stats_size_out = stats_size_in;
	return NRT_SUCCESS;
}

NRTAPI const char *nrt_get_status_as_str(NRT_STATUS status)
{
	switch (status) {
	case NRT_SUCCESS:
		return "Success";
	case NRT_FAILURE:
		return "Failure";
	case NRT_INVALID:
		return "Invalid";
	case NRT_INVALID_HANDLE:
		return "Invalid Handle";
	case NRT_RESOURCE:
		return "Allocation Failure";
	case NRT_TIMEOUT:
		return "Timeout";
	case NRT_HW_ERROR:
		return "Hardware Error";
	case NRT_QUEUE_FULL:
		return "Queue Full";
	case NRT_LOAD_NOT_ENOUGH_NC:
		return "Not Enough Neuron Cores";
	case NRT_UNSUPPORTED_NEFF_VERSION:
		return "Unsupported NEFF Version";
	case NRT_UNINITIALIZED:
		return "Uninitialized";
	case NRT_CLOSED:
		return "Closed";
	default:
		return "Unknown Status";
	}
}
