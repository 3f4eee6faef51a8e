"""Measuring on a remote device through TVM RPC, the way TVM users measure on boards and phones.

Start a tracker and register devices with it (on the device, or a host it is
attached to):

    python -m tvm.exec.rpc_tracker --host 0.0.0.0 --port 9190
    python -m tvm.exec.rpc_server --tracker <tracker host>:9190 --key <key>

then cost with `MeasuredCost(target, runner=RPCRunner(host, 9190, key))`
(or `taso-relay ... --rpc host:9190:key`). Kernels are compiled here for
`target` (give it the device's triple, e.g. {"kind": "llvm", "mtriple":
"aarch64-linux-gnu"}, and a cross compiler via `fcompile`), exported as a
shared library, uploaded, loaded with `remote.load_module`, and timed on the
device with the VM's time_evaluator. One session serves a whole batch; a
dropped session is reopened once. Cached times are keyed by device
"rpc:<key>", so local and remote measurements never mix.
"""
from __future__ import annotations

import os
import tempfile
import uuid
from typing import Sequence

import numpy as np

from .runner import TimerSettings, Timing, time_vm


def parse_rpc(spec: str) -> tuple[str, int, str]:
    """"host:port:key" -> (host, port, key)."""
    parts = spec.rsplit(":", 2)
    if len(parts) != 3 or not parts[1].isdigit() or not parts[2]:
        raise ValueError(f"expected host:port:key, got '{spec}'")
    return parts[0], int(parts[1]), parts[2]


class RPCRunner:
    """Times executables on a device obtained from an RPC tracker under `key`."""

    exclusive = False  # the device is reserved through the tracker, not by a local lock

    def __init__(self, tracker_host: str, tracker_port: int, key: str, *, settings: TimerSettings | None = None,
                 priority: int = 1, session_timeout: float = 0, device: str = "cpu", fcompile=None):
        self.tracker_host, self.tracker_port, self.key = tracker_host, int(tracker_port), key
        self.settings = settings or TimerSettings()
        self.priority = priority
        self.session_timeout = session_timeout
        self.device = device
        self.fcompile = fcompile
        self._session = None

    @property
    def device_key(self) -> str:
        return f"rpc:{self.key}"

    def session(self):
        if self._session is None:
            from tvm import rpc

            tracker = rpc.connect_tracker(self.tracker_host, self.tracker_port)
            self._session = tracker.request(self.key, priority=self.priority, session_timeout=self.session_timeout)
        return self._session

    def time(self, executable, inputs: Sequence[np.ndarray], target=None) -> Timing:
        try:
            return self._time(executable, inputs)
        except Exception:  # noqa: BLE001 - a dropped session: reconnect once
            self._session = None
            return self._time(executable, inputs)

    def _time(self, executable, inputs: Sequence[np.ndarray]) -> Timing:
        import tvm
        from tvm import relax

        remote = self.session()
        name = f"taso_kernel_{uuid.uuid4().hex[:12]}.so"
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, name)
            if self.fcompile is not None:
                executable.export_library(path, fcompile=self.fcompile)
            else:
                executable.export_library(path)
            remote.upload(path)
        lib = remote.load_module(name)
        dev = remote.device(self.device, 0)
        vm = relax.VirtualMachine(lib, dev)
        args = [tvm.runtime.tensor(a, dev) for a in inputs]
        timing = time_vm(vm, dev, args, self.settings)
        try:
            remote.remove(name)
        except Exception:  # noqa: BLE001 - cleanup only
            pass
        return timing

    def close(self) -> None:
        self._session = None
