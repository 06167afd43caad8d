/* SPDX-License-Identifier: GPL-2.0 */
/*
 * C helpers of rnvme_rdma: out-of-line versions of the static inline functions and macros the
 * Rust code needs, compiled into the module (rust/helpers.c) and bound by bindgen.
 */
#ifndef RNVME_HELPERS_H
#define RNVME_HELPERS_H

#include <linux/types.h>

struct nvme_ctrl;
struct ib_device;
struct rdma_cm_id;
struct rdma_cm_event;
struct net;

/* nvme.h: reference counting of a controller (its struct device). */
void rnvme_nvme_get_ctrl(struct nvme_ctrl *ctrl);
void rnvme_nvme_put_ctrl(struct nvme_ctrl *ctrl);

/* Whether a module of this name is currently present (looks at /sys/module/NAME). */
bool rnvme_module_present(const char *name);



/* rdma_cm.h: rdma_create_id() is a macro naming the caller module. */
struct rdma_cm_id *rnvme_rdma_create_id(struct net *net,
					int (*handler)(struct rdma_cm_id *, struct rdma_cm_event *),
					void *context, int ps, int qp_type);
#endif
