// SPDX-License-Identifier: GPL-2.0
/*
 * C helpers of rnvme_rdma (declared in helpers.h). Only thin wrappers around static inline
 * kernel functions and macros live here: all logic is in Rust.
 */
#include <linux/blk_types.h>
#include <linux/module.h>
#include <linux/namei.h>
#include <linux/path.h>
#include <linux/string.h>
#include <rdma/rdma_cm.h>
#include "nvme.h"
#include "helpers.h"

MODULE_VERSION("0.1.0");

/* Values the Rust side hard-codes because bindgen cannot evaluate the macros. */
static_assert((__force u8)BLK_STS_RESOURCE == 9);
static_assert((__force u8)BLK_STS_IOERR == 10);

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

struct ib_pd *rnvme_ib_alloc_pd(struct ib_device *dev, unsigned int flags)
{
	return ib_alloc_pd(dev, flags);
}

void rnvme_ib_dealloc_pd(struct ib_pd *pd)
{
	ib_dealloc_pd(pd);
}

struct ib_cq *rnvme_ib_alloc_cq(struct ib_device *dev, void *private, int nr_cqe,
				int comp_vector, int poll_ctx)
{
	return ib_alloc_cq(dev, private, nr_cqe, comp_vector, poll_ctx);
}

int rnvme_ib_destroy_qp(struct ib_qp *qp)
{
	return ib_destroy_qp(qp);
}

int rnvme_ib_post_send(struct ib_qp *qp, const struct ib_send_wr *wr)
{
	return ib_post_send(qp, wr, NULL);
}

int rnvme_ib_post_recv(struct ib_qp *qp, const struct ib_recv_wr *wr)
{
	return ib_post_recv(qp, wr, NULL);
}

u64 rnvme_ib_dma_map_single(struct ib_device *dev, void *addr, size_t size, int dir)
{
	return ib_dma_map_single(dev, addr, size, dir);
}

void rnvme_ib_dma_unmap_single(struct ib_device *dev, u64 addr, size_t size, int dir)
{
	ib_dma_unmap_single(dev, addr, size, dir);
}

int rnvme_ib_dma_mapping_error(struct ib_device *dev, u64 addr)
{
	return ib_dma_mapping_error(dev, addr);
}

void rnvme_ib_dma_sync_single_for_cpu(struct ib_device *dev, u64 addr, size_t size, int dir)
{
	ib_dma_sync_single_for_cpu(dev, addr, size, dir);
}

void rnvme_ib_dma_sync_single_for_device(struct ib_device *dev, u64 addr, size_t size, int dir)
{
	ib_dma_sync_single_for_device(dev, addr, size, dir);
}

bool rnvme_ib_device_try_get(struct ib_device *dev)
{
	return ib_device_try_get(dev);
}

int rnvme_nvme_ctrl_state(struct nvme_ctrl *ctrl)
{
	return nvme_ctrl_state(ctrl);
}

void rnvme_nvme_init_reset_work(struct nvme_ctrl *ctrl, void (*fn)(struct work_struct *))
{
	INIT_WORK(&ctrl->reset_work, fn);
}

void *rnvme_blk_mq_rq_to_pdu(struct request *rq)
{
	return blk_mq_rq_to_pdu(rq);
}

void rnvme_nvme_start_request(struct request *rq)
{
	nvme_start_request(rq);
}

bool rnvme_nvme_try_complete_req(struct request *rq, __le16 status, union nvme_result result)
{
	return nvme_try_complete_req(rq, status, result);
}
