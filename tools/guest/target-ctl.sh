#!/bin/bash
# The target guest of a `scripts/vm-run --pair` run: rxe on eth0 and siw on eth1, nvmet-rdma
# loaded, then tools/guest/target-ctl.py serves the host guest's requests (lib.sh `target_run`)
# on the control wire until vm-run asks it to stop (/results/stop).
. "$RNVME_PROJECT/tools/guest/lib.sh"
fabric_up rxe && fabric_up siw && modprobe nvmet && modprobe nvmet-rdma || { echo "target setup failed"; exit 1; }
rdma link show
exec python3 "$RNVME_PROJECT/tools/guest/target-ctl.py"
