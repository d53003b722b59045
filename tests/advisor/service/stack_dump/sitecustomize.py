"""Tests only: put this folder on a child process's PYTHONPATH to have it print every
thread's stack to its standard error on SIGUSR2 (``faulthandler``; inherited by RQ's forked
work horse). The fault suite asks a stalled worker where it waits (``Cluster.stall_report``)."""

import faulthandler
import signal
import sys

faulthandler.register(signal.SIGUSR2, file=sys.stderr, all_threads=True, chain=False)
