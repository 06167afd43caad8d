// SPDX-License-Identifier: GPL-2.0
/*
 * C helpers of rnvme_rdma (declared in helpers.h). Only thin wrappers around static inline
 * kernel functions and macros live here: all logic is in Rust.
 */
#include <linux/module.h>
#include <linux/namei.h>
#include <linux/path.h>
#include <linux/string.h>
#include <rdma/rdma_cm.h>
#include "nvme.h"
#include "helpers.h"

MODULE_VERSION("0.1.0");

void rnvme_nvme_get_ctrl(struct nvme_ctrl *ctrl)
{
	nvme_get_ctrl(ctrl);
}

void rnvme_nvme_put_ctrl(struct nvme_ctrl *ctrl)
{
	nvme_put_ctrl(ctrl);
}

bool rnvme_module_present(const char *name)
{
	char buf[64];
	struct path path;

	if (snprintf(buf, sizeof(buf), "/sys/module/%s", name) >= sizeof(buf))
		return false;
	if (kern_path(buf, LOOKUP_FOLLOW, &path))
		return false;
	path_put(&path);
	return true;
}

struct rdma_cm_id *rnvme_rdma_create_id(struct net *net,
					int (*handler)(struct rdma_cm_id *, struct rdma_cm_event *),
					void *context, int ps, int qp_type)
{
	return rdma_create_id(net, handler, context, ps, qp_type);
}
