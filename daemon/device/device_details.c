#include "device/device_details.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include <ruda/common.h>
#include <ruda/status.h>

#include "device/device.h"

/* A sample window shorter than this is extended rather than replaced. */
#define UTILIZATION_WINDOW_NS (100ull * 1000 * 1000)

static int has_ext(const VkExtensionProperties *exts, uint32_t n, const char *name)
{
	for (uint32_t i = 0; i < n; i++)
		if (strcmp(exts[i].extensionName, name) == 0)
			return 1;
	return 0;
}

static uint32_t elem_of_component(VkComponentTypeNV type)
{
	switch (type) {
	case VK_COMPONENT_TYPE_FLOAT16_NV: return RUDA_ELEM_F16;
	case VK_COMPONENT_TYPE_FLOAT32_NV: return RUDA_ELEM_F32;
	case VK_COMPONENT_TYPE_FLOAT64_NV: return RUDA_ELEM_F64;
	case VK_COMPONENT_TYPE_SINT8_NV: return RUDA_ELEM_I8;
	case VK_COMPONENT_TYPE_SINT16_NV: return RUDA_ELEM_I16;
	case VK_COMPONENT_TYPE_SINT32_NV: return RUDA_ELEM_I32;
	case VK_COMPONENT_TYPE_SINT64_NV: return RUDA_ELEM_I64;
	case VK_COMPONENT_TYPE_UINT8_NV: return RUDA_ELEM_U8;
	case VK_COMPONENT_TYPE_UINT16_NV: return RUDA_ELEM_U16;
	case VK_COMPONENT_TYPE_UINT32_NV: return RUDA_ELEM_U32;
	default: return RUDA_ELEM_U64;
	}
}

/* Cooperative-matrix shapes (VK_NV_cooperative_matrix) where present. */
static void query_coop(struct ruda_device_details *x, VkPhysicalDevice physical,
		       VkInstance instance)
{
	PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV get =
		(PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV)vkGetInstanceProcAddr(
			instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV");
	uint32_t n = 0;
	if (!get || get(physical, &n, NULL) != VK_SUCCESS || !n)
		return;
	VkCooperativeMatrixPropertiesNV *p = calloc(n, sizeof(*p));
	if (!p)
		return;
	for (uint32_t i = 0; i < n; i++)
		p[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV;
	VkResult r = get(physical, &n, p);
	if (r == VK_SUCCESS || r == VK_INCOMPLETE)
		for (uint32_t i = 0; i < n && x->ncoop < RUDA_DETAILS_MAX_COOP; i++)
			x->coop[x->ncoop++] = (struct ruda_coop_shape){
				.m = p[i].MSize, .n = p[i].NSize, .k = p[i].KSize,
				.a = elem_of_component(p[i].AType), .b = elem_of_component(p[i].BType),
				.c = elem_of_component(p[i].CType), .d = elem_of_component(p[i].DType),
			};
	free(p);
}

int ruda__device_details_query(struct ruda_device *d, VkInstance instance)
{
	struct ruda_device_details *x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	uint32_t nexts = 0;
	vkEnumerateDeviceExtensionProperties(d->physical, NULL, &nexts, NULL);
	VkExtensionProperties *exts = calloc(nexts ? nexts : 1, sizeof(*exts));
	if (!exts) {
		free(x);
		return -ENOMEM;
	}
	vkEnumerateDeviceExtensionProperties(d->physical, NULL, &nexts, exts);
	int size_control = d->props.apiVersion >= VK_API_VERSION_1_3 ||
			   has_ext(exts, nexts, VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
	x->memory_budget = has_ext(exts, nexts, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
	int coop = has_ext(exts, nexts, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
	free(exts);

	VkPhysicalDeviceSubgroupSizeControlPropertiesEXT sizes = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES_EXT,
	};
	VkPhysicalDeviceSubgroupProperties subgroup = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES,
		.pNext = size_control ? &sizes : NULL,
	};
	VkPhysicalDeviceProperties2 props2 = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
		.pNext = &subgroup,
	};
	vkGetPhysicalDeviceProperties2(d->physical, &props2);
	x->subgroup_operations = subgroup.supportedOperations;
	x->min_subgroup_size = size_control && sizes.minSubgroupSize ? sizes.minSubgroupSize
								     : d->subgroup_size;
	x->max_subgroup_size = size_control && sizes.maxSubgroupSize ? sizes.maxSubgroupSize
								     : d->subgroup_size;
	const VkPhysicalDeviceLimits *l = &d->props.limits;
	x->max_shared_memory = l->maxComputeSharedMemorySize;
	x->max_storage_buffers = l->maxPerStageDescriptorStorageBuffers;
	x->timestamp_period_ps = d->timestamps ? (uint32_t)(d->timestamp_period * 1000.0) : 0;
	x->spirv_version = d->props.apiVersion >= VK_API_VERSION_1_3   ? 0x00010600u
			   : d->props.apiVersion >= VK_API_VERSION_1_2 ? 0x00010500u
								       : 0x00010300u;

	/* element types kernels may keep in storage buffers */
	const struct ruda_spirv_features *f = &d->spirv_features;
	uint32_t t = 1u << RUDA_ELEM_F32 | 1u << RUDA_ELEM_I32 | 1u << RUDA_ELEM_U32;
	if (f->float16 && f->storage_buffer16)
		t |= 1u << RUDA_ELEM_F16;
	if (f->int16 && f->storage_buffer16)
		t |= 1u << RUDA_ELEM_I16 | 1u << RUDA_ELEM_U16;
	if (f->int8 && f->storage_buffer8)
		t |= 1u << RUDA_ELEM_I8 | 1u << RUDA_ELEM_U8;
	if (f->float64)
		t |= 1u << RUDA_ELEM_F64;
	if (f->int64)
		t |= 1u << RUDA_ELEM_I64 | 1u << RUDA_ELEM_U64;
	x->elem_types = t;
	x->atomic_elem_types = 1u << RUDA_ELEM_I32 | 1u << RUDA_ELEM_U32;
	if (f->int64_atomics)
		x->atomic_elem_types |= 1u << RUDA_ELEM_I64 | 1u << RUDA_ELEM_U64;
	if (coop)
		query_coop(x, d->physical, instance);
	d->details = x;
	return 0;
}

void ruda__device_details_free(struct ruda_device *d)
{
	free(d->details);
	d->details = NULL;
}

uint32_t ruda__device_memory_budget(const struct ruda_device *d, uint64_t *usage,
				    uint64_t *budget, uint32_t max)
{
	if (!d->details || !d->details->memory_budget)
		return 0;
	VkPhysicalDeviceMemoryBudgetPropertiesEXT b = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT,
	};
	VkPhysicalDeviceMemoryProperties2 m = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2,
		.pNext = &b,
	};
	vkGetPhysicalDeviceMemoryProperties2(d->physical, &m);
	uint32_t n = m.memoryProperties.memoryHeapCount < max ? m.memoryProperties.memoryHeapCount
							      : max;
	for (uint32_t i = 0; i < n; i++) {
		usage[i] = b.heapUsage[i];
		budget[i] = b.heapBudget[i];
	}
	return n;
}

double ruda__device_recent_utilization(struct ruda_device *d, uint64_t *window_ns)
{
	struct ruda_device_details *x = d->details;
	uint64_t now = uv_hrtime();
	if (!x) {
		*window_ns = 0;
		return 0;
	}
	if (!x->sample_ns) {
		/* the first window: since the device was opened */
		x->sample_ns = d->opened_ns;
		x->sample_busy_ns = 0;
	}
	if (now - x->sample_ns >= UTILIZATION_WINDOW_NS) {
		/* the running submission counts so far (a hung launch shows
		 * busy); its time on completion may differ a little */
		uint64_t total = ruda__device_busy_ns(d);
		uint64_t span = now - x->sample_ns;
		uint64_t busy = total > x->sample_busy_ns ? total - x->sample_busy_ns : 0;
		x->recent = span ? (double)busy / (double)span : 0;
		if (x->recent > 1)
			x->recent = 1; /* submissions overlap on several queues */
		x->window_ns = span;
		x->sample_ns = now;
		x->sample_busy_ns = total;
	}
	*window_ns = x->window_ns;
	return x->recent;
}
