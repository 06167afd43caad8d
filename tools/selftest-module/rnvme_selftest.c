// SPDX-License-Identifier: GPL-2.0
/*
 * rnvme_selftest: provokes, on request, the kernel conditions that scripts/vm-run must report as
 * a failed run. Used only by the vm-run self-tests of `make check` (tools/check); never shipped.
 *
 *   insmod rnvme_selftest.ko action=leak             unreferenced allocations (kmemleak)
 *   insmod rnvme_selftest.ko action=lockdep          an AB-BA lock order (lockdep report)
 *   insmod rnvme_selftest.ko action=debug_locks_off  lockdep switched off without a report
 *   insmod rnvme_selftest.ko action=hung_task        the loading task sleeps uninterruptibly
 *                                                    for `seconds` (a hung-task report once
 *                                                    hung_task_timeout_secs is lower)
 *   insmod rnvme_selftest.ko action=spin             this CPU spins with preemption disabled
 *                                                    for `seconds` (a soft lockup, or an RCU
 *                                                    stall, once their thresholds are lower)
 * Each condition ends after `seconds`, so the guest lives on to report it, and `rmmod` between
 * two actions lets one boot provoke several in turn.
 */
#include <linux/debug_locks.h>
#include <linux/delay.h>
#include <linux/sched.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/rcupdate.h>
#include <linux/slab.h>

static char *action = "";
module_param(action, charp, 0444);
MODULE_PARM_DESC(action, "leak | lockdep | debug_locks_off | hung_task | spin");
static unsigned int seconds = 8;
module_param(seconds, uint, 0444);
MODULE_PARM_DESC(seconds, "how long hung_task and spin last");

static DEFINE_MUTEX(selftest_a);
static DEFINE_MUTEX(selftest_b);

/* Not static and not inlined: the pointers live only in this frame and are then forgotten. */
static noinline void selftest_leak(void)
{
	int i;

	for (i = 0; i < 8; i++) {
		void *p = kmalloc(64 << i, GFP_KERNEL);

		if (p)
			memset(p, 0x5a, 64 << i);
		pr_info("rnvme_selftest: leaking an object of %d bytes\n", 64 << i);
	}
}

static noinline void selftest_lockdep(void)
{
	mutex_lock(&selftest_a);
	mutex_lock(&selftest_b);
	mutex_unlock(&selftest_b);
	mutex_unlock(&selftest_a);
	/* The reverse order: lockdep reports a possible circular dependency (no real deadlock). */
	mutex_lock(&selftest_b);
	mutex_lock(&selftest_a);
	mutex_unlock(&selftest_a);
	mutex_unlock(&selftest_b);
}

static noinline void selftest_hung_task(void)
{
	/* D state, no wakeup until the timeout: what the hung-task detector looks for. */
	schedule_timeout_uninterruptible(seconds * HZ);
}

static struct rcu_head selftest_rcu;

static void selftest_rcu_done(struct rcu_head *head)
{
}

static noinline void selftest_spin(void)
{
	unsigned long end = jiffies + seconds * HZ;

	/*
	 * No scheduling and no RCU quiescent state on this CPU until the end: the soft-lockup
	 * watchdog's thread cannot run here, and the grace period cannot end. A grace period is
	 * asked for (not lazily) once the spin has begun, so it starts, with the stall timeout set
	 * now, and waits for this CPU: an idle guest might not start one within the spin otherwise.
	 * (The head is static; the module's exit waits for the callback, so it can be unloaded and
	 * loaded again for the next action of the same boot.)
	 */
	preempt_disable();
	call_rcu_hurry(&selftest_rcu, selftest_rcu_done);
	while (time_before(jiffies, end))
		cpu_relax();
	preempt_enable();
}

static int __init rnvme_selftest_init(void)
{
	if (!strcmp(action, "leak"))
		selftest_leak();
	else if (!strcmp(action, "lockdep"))
		selftest_lockdep();
	else if (!strcmp(action, "debug_locks_off"))
		debug_locks_off();
	else if (!strcmp(action, "hung_task"))
		selftest_hung_task();
	else if (!strcmp(action, "spin"))
		selftest_spin();
	else
		return -EINVAL;
	pr_info("rnvme_selftest: %s done\n", action);
	return 0;
}

static void __exit rnvme_selftest_exit(void)
{
	rcu_barrier();
}

module_init(rnvme_selftest_init);
module_exit(rnvme_selftest_exit);
MODULE_DESCRIPTION("rnvme-rdma harness self-test: provokes what vm-run must catch");
MODULE_LICENSE("GPL");
