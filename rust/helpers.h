/* SPDX-License-Identifier: GPL-2.0 */
/*
 * C helpers of rnvme_rdma: out-of-line versions of the static inline functions and macros the
 * Rust code needs, compiled into the module (rust/helpers.c) and bound by bindgen.
 */
#ifndef RNVME_HELPERS_H
#define RNVME_HELPERS_H

#include <linux/types.h>
#include <linux/nvme.h>

struct nvme_ctrl;
struct work_struct;
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

/* ib_verbs.h: static inline functions and macros naming the caller module. */
struct ib_pd;
struct ib_cq;
struct ib_qp;
struct ib_send_wr;
struct ib_recv_wr;
struct ib_pd *rnvme_ib_alloc_pd(struct ib_device *dev, unsigned int flags);
void rnvme_ib_dealloc_pd(struct ib_pd *pd);
struct ib_cq *rnvme_ib_alloc_cq(struct ib_device *dev, void *private, int nr_cqe,
				int comp_vector, int poll_ctx);
int rnvme_ib_destroy_qp(struct ib_qp *qp);
int rnvme_ib_post_send(struct ib_qp *qp, const struct ib_send_wr *wr);
int rnvme_ib_post_recv(struct ib_qp *qp, const struct ib_recv_wr *wr);
u64 rnvme_ib_dma_map_single(struct ib_device *dev, void *addr, size_t size, int dir);
void rnvme_ib_dma_unmap_single(struct ib_device *dev, u64 addr, size_t size, int dir);
int rnvme_ib_dma_mapping_error(struct ib_device *dev, u64 addr);
void rnvme_ib_dma_sync_single_for_cpu(struct ib_device *dev, u64 addr, size_t size, int dir);
void rnvme_ib_dma_sync_single_for_device(struct ib_device *dev, u64 addr, size_t size, int dir);
bool rnvme_ib_device_try_get(struct ib_device *dev);

/* nvme.h: the controller's state (an atomic read) and its reset work (INIT_WORK is a macro). */
int rnvme_nvme_ctrl_state(struct nvme_ctrl *ctrl);
void rnvme_nvme_init_reset_work(struct nvme_ctrl *ctrl, void (*fn)(struct work_struct *));
/* blk-mq / nvme request helpers (static inline). */
struct request;
void *rnvme_blk_mq_rq_to_pdu(struct request *rq);
void rnvme_nvme_start_request(struct request *rq);
bool rnvme_nvme_try_complete_req(struct request *rq, __le16 status, union nvme_result result);

#endif
