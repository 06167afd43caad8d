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
struct request;
struct nvmf_ctrl_options;

/* nvme.h: reference counting of a controller (its struct device). */
void rnvme_nvme_get_ctrl(struct nvme_ctrl *ctrl);
/* nvme_auth_stop(): waits for and cancels DH-HMAC-CHAP re-authentication work. */
void rnvme_nvme_auth_stop(struct nvme_ctrl *ctrl);
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
struct ib_mr;
struct ib_send_wr;
struct ib_pd *rnvme_ib_alloc_pd(struct ib_device *dev, unsigned int flags);
void rnvme_ib_dealloc_pd(struct ib_pd *pd);
struct ib_cq *rnvme_ib_alloc_cq(struct ib_device *dev, void *private, int nr_cqe,
				int comp_vector, int poll_ctx);
int rnvme_ib_destroy_qp(struct ib_qp *qp);
int rnvme_ib_post_send(struct ib_qp *qp, const struct ib_send_wr *wr);
int rnvme_ib_post_send_chain(struct ib_qp *qp, const struct ib_send_wr *wr,
			     const struct ib_send_wr **bad);
void rnvme_rq_list_add_tail(struct rq_list *rl, struct request *rq);
/* ib_mr_pool_get() on the QP's rdma_mrs pool, out of line for fault injection. */
struct ib_mr *rnvme_ib_mr_pool_get(struct ib_qp *qp);
/* ib_dma_map_single() into *@dma; -ENOMEM if ib_dma_mapping_error() says it failed. */
int rnvme_ib_dma_map_single(struct ib_device *dev, void *addr, size_t size, int dir, u64 *dma);
void rnvme_ib_dma_unmap_single(struct ib_device *dev, u64 addr, size_t size, int dir);
void rnvme_ib_dma_sync_single_for_cpu(struct ib_device *dev, u64 addr, size_t size, int dir);
void rnvme_ib_dma_sync_single_for_device(struct ib_device *dev, u64 addr, size_t size, int dir);
bool rnvme_ib_device_try_get(struct ib_device *dev);

/* nvme.h: the controller's reset work (INIT_WORK is a macro). */
void rnvme_nvme_init_reset_work(struct nvme_ctrl *ctrl, void (*fn)(struct work_struct *));
/* blk-mq / nvme request helpers (static inline). */
struct request;
void *rnvme_blk_mq_rq_to_pdu(struct request *rq);

/* Data path: scatterlists, memory registration, blk-mq and nvme inline helpers. */
struct scatterlist;
struct sg_table;
struct ib_mr;
struct blk_mq_tags;
struct nvme_command;
/* Scatterlist entries kept in each request (NVME_INLINE_SG_CNT of the C host drivers). */
#define RNVME_INLINE_SG_CNT 2
/* Undoes the data mapping of a hardware device's request (rust/nvme/mapping.rs maps it: a
 * scatterlist with the first RNVME_INLINE_SG_CNT entries inside the request, DMA-mapped in
 * direction @dir). */
void rnvme_unmap_rq_data(struct ib_device *dev, struct sg_table *sgt, int dir);
bool rnvme_rq_is_passthrough(struct request *rq);
struct request *rnvme_nvme_find_rq(struct blk_mq_tags *tags, u16 command_id);
void rnvme_tagset_abort(struct blk_mq_tag_set *set, int hctx_idx);
/* The slow path of nvme_check_ready() (the caller tested for NVME_CTRL_LIVE). */
bool rnvme_nvme_check_ready(struct nvme_ctrl *ctrl, struct request *rq, bool queue_live);
u16 rnvme_nvme_cid(struct request *rq);
/* The command's name as the core spells it (nvme_fabrics_opcode_str(): "Connect", "Read"; a
 * static string; "Fabrics Cmd", "I/O Cmd"... without CONFIG_NVME_VERBOSE_ERRORS). */
const char *rnvme_nvme_opcode_str(struct request *rq, int qid);
void rnvme_nvmf_complete_timed_out_request(struct request *rq);
u32 rnvme_nvmf_nr_io_queues(struct nvmf_ctrl_options *opts);
int rnvme_ibdev_to_node(struct ib_device *dev);
void *rnvme_rq_queuedata(struct request *rq);
struct nvmf_ctrl_options;
void rnvme_ctrl_set_opts_trsvcid_default(struct nvmf_ctrl_options *opts, const char *dflt, int *err);

/* Transport work items of a controller (INIT_WORK and queue_work are macros/inline). */
struct delayed_work;
void rnvme_init_work(struct work_struct *w, void (*fn)(struct work_struct *));
void rnvme_init_delayed_work(struct delayed_work *w, void (*fn)(struct work_struct *));
bool rnvme_queue_reset_work(struct work_struct *w);
bool rnvme_queue_nvme_delayed_work(struct delayed_work *w, unsigned long delay_secs);
struct work_struct *rnvme_delayed_work_work(struct delayed_work *w);
void rnvme_flush_nvme_delete_wq(void);
/* The module's queue-setup workqueue: unbound, with a rescuer (WQ_MEM_RECLAIM). */
struct workqueue_struct;
struct workqueue_struct *rnvme_alloc_setup_wq(void);

#endif
