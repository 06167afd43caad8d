/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Headers whose declarations rnvme_rdma binds (see bindgen_parameters). Types that the kernel
 * crate's own bindings already contain are reused from kernel::bindings.
 */
#include <linux/blk-mq.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>
#include <rdma/mr_pool.h>
#include <linux/nvme-rdma.h>
#include <linux/nvme.h>
#include "nvme.h"
#include "fabrics.h"
#include "helpers.h"
