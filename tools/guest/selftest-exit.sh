#!/bin/bash
# vm-run self-test: a guest script's exit status must become vm-run's exit status.
echo "exiting with status 3 on purpose"
exit 3
