// SPDX-License-Identifier: GPL-2.0
/*
 * C helpers of rnvme_rdma (declared in helpers.h). Only thin wrappers around static inline
 * kernel functions and macros live here: all logic is in Rust.
 */
#include <linux/blk_types.h>
#include <linux/error-injection.h>
#include <linux/module.h>
#include <linux/namei.h>
#include <linux/path.h>
#include <linux/string.h>
#include <linux/scatterlist.h>
#include <linux/blk-mq.h>
#include <rdma/mr_pool.h>
#include <rdma/rdma_cm.h>
#include "nvme.h"
#include "fabrics.h"
#include "helpers.h"

/* modinfo's version: dkms.conf's PACKAGE_VERSION, the release's one home, passed by Kbuild. */
MODULE_VERSION(RNVME_VERSION);

/* Values the Rust side hard-codes because bindgen cannot evaluate the macros. */
static_assert((__force u8)BLK_STS_RESOURCE == 9);
static_assert((__force u8)BLK_STS_IOERR == 10);
/* Request::setup_and_start tests REQ_DRV for nvme_start_request's REQ_NVME_MPATH. */
static_assert(REQ_NVME_MPATH == REQ_DRV);

void rnvme_nvme_get_ctrl(struct nvme_ctrl *ctrl)
{
	nvme_get_ctrl(ctrl);
}

/* An exported function with CONFIG_NVME_HOST_AUTH, an empty inline without: wrapped for both. */
void rnvme_nvme_auth_stop(struct nvme_ctrl *ctrl)
{
	nvme_auth_stop(ctrl);
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
/* fail_function can make posting fail (tests of the paths that release a request's mappings). */
ALLOW_ERROR_INJECTION(rnvme_ib_post_send, ERRNO);

/* Several requests' work requests in one chain: *bad is the first one not posted (left as the
 * caller set it when the call fails before the provider ran, as under fail_function). */
int rnvme_ib_post_send_chain(struct ib_qp *qp, const struct ib_send_wr *wr,
			     const struct ib_send_wr **bad)
{
	return ib_post_send(qp, wr, bad);
}
ALLOW_ERROR_INJECTION(rnvme_ib_post_send_chain, ERRNO);

void rnvme_rq_list_add_tail(struct rq_list *rl, struct request *rq)
{
	rq_list_add_tail(rl, rq);
}

struct ib_mr *rnvme_ib_mr_pool_get(struct ib_qp *qp)
{
	return ib_mr_pool_get(qp, &qp->rdma_mrs);
}
/* fail_function can make the MR pool look empty (returns NULL). */
ALLOW_ERROR_INJECTION(rnvme_ib_mr_pool_get, NULL);

int rnvme_ib_dma_map_single(struct ib_device *dev, void *addr, size_t size, int dir, u64 *dma)
{
	*dma = ib_dma_map_single(dev, addr, size, dir);
	return ib_dma_mapping_error(dev, *dma) ? -ENOMEM : 0;
}

void rnvme_ib_dma_unmap_single(struct ib_device *dev, u64 addr, size_t size, int dir)
{
	ib_dma_unmap_single(dev, addr, size, dir);
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

void rnvme_nvme_init_reset_work(struct nvme_ctrl *ctrl, void (*fn)(struct work_struct *))
{
	INIT_WORK(&ctrl->reset_work, fn);
}

void *rnvme_blk_mq_rq_to_pdu(struct request *rq)
{
	return blk_mq_rq_to_pdu(rq);
}

void rnvme_unmap_rq_data(struct ib_device *dev, struct sg_table *sgt, int dir)
{
	ib_dma_unmap_sg(dev, sgt->sgl, sgt->nents, dir);
	sg_free_table_chained(sgt, RNVME_INLINE_SG_CNT);
}

bool rnvme_rq_is_passthrough(struct request *rq)
{
	return blk_rq_is_passthrough(rq);
}

struct request *rnvme_nvme_find_rq(struct blk_mq_tags *tags, u16 command_id)
{
	return nvme_find_rq(tags, command_id);
}

bool rnvme_nvme_check_ready(struct nvme_ctrl *ctrl, struct request *rq, bool queue_live)
{
	return nvme_check_ready(ctrl, rq, queue_live);
}

u16 rnvme_nvme_cid(struct request *rq)
{
	return nvme_cid(rq);
}

const char *rnvme_nvme_opcode_str(struct request *rq, int qid)
{
	return nvme_fabrics_opcode_str(qid, nvme_req(rq)->cmd);
}

static bool rnvme_abort_one(struct request *rq, void *data)
{
	int hctx_idx = *(int *)data;

	if (hctx_idx < 0 || rq->mq_hctx->queue_num == hctx_idx)
		blk_abort_request(rq);
	return true;
}

/*
 * Hands every started request of @set (only those of hardware queue @hctx_idx if it is not
 * negative) to the timeout handler now (blk_abort_request), as if its timeout had expired.
 */
void rnvme_tagset_abort(struct blk_mq_tag_set *set, int hctx_idx)
{
	blk_mq_tagset_busy_iter(set, rnvme_abort_one, &hctx_idx);
}

void rnvme_nvmf_complete_timed_out_request(struct request *rq)
{
	nvmf_complete_timed_out_request(rq);
}

u32 rnvme_nvmf_nr_io_queues(struct nvmf_ctrl_options *opts)
{
	return nvmf_nr_io_queues(opts);
}

int rnvme_ibdev_to_node(struct ib_device *dev)
{
	return ibdev_to_node(dev);
}

void *rnvme_rq_queuedata(struct request *rq)
{
	return rq->q->queuedata;
}

void rnvme_ctrl_set_opts_trsvcid_default(struct nvmf_ctrl_options *opts, const char *dflt, int *err)
{
	*err = 0;
	if (opts->mask & NVMF_OPT_TRSVCID)
		return;
	opts->trsvcid = kstrdup(dflt, GFP_KERNEL);
	if (!opts->trsvcid) {
		*err = -ENOMEM;
		return;
	}
	opts->mask |= NVMF_OPT_TRSVCID;
}

void rnvme_init_work(struct work_struct *w, void (*fn)(struct work_struct *))
{
	INIT_WORK(w, fn);
}

void rnvme_init_delayed_work(struct delayed_work *w, void (*fn)(struct work_struct *))
{
	INIT_DELAYED_WORK(w, fn);
}

bool rnvme_queue_reset_work(struct work_struct *w)
{
	return queue_work(nvme_reset_wq, w);
}

bool rnvme_queue_nvme_delayed_work(struct delayed_work *w, unsigned long delay_secs)
{
	return queue_delayed_work(nvme_wq, w, delay_secs * HZ);
}

struct work_struct *rnvme_delayed_work_work(struct delayed_work *w)
{
	return &w->work;
}

void rnvme_flush_nvme_delete_wq(void)
{
	flush_workqueue(nvme_delete_wq);
}

struct workqueue_struct *rnvme_alloc_setup_wq(void)
{
	return alloc_workqueue("rnvme_rdma_setup", WQ_UNBOUND | WQ_MEM_RECLAIM, 0);
}
