"""`spotrun agent gpus`: the GPUs this machine's torch sees, and those nvidia-smi lists.

The controller asks before every job starts (spotrun.control.gpu_check) and compares the answer
with the instance type's GPUs: an instance whose driver is broken or whose CUDA torch cannot
use would otherwise train on its CPU at a GPU's price.
"""

from __future__ import annotations

import shutil
import subprocess

NVIDIA_SMI_TIMEOUT_S = 60.0


def torch_gpus() -> tuple[int | None, str | None]:
    """CUDA devices torch sees, or None and why it could not be asked."""
    try:
        # why: torch takes seconds to import; only this one-shot command needs it
        import torch
    except ImportError as exc:
        return None, f"torch does not import: {exc}"
    try:
        return int(torch.cuda.device_count()), None
    except RuntimeError as exc:  # a driver that torch finds but cannot talk to
        return 0, f"torch.cuda: {exc}"


def nvidia_smi_gpus() -> tuple[int | None, str | None]:
    """GPUs `nvidia-smi -L` lists, or None and why it could not be asked."""
    found = shutil.which("nvidia-smi")
    if found is None:
        return None, "nvidia-smi not found"
    try:
        done = subprocess.run(
            [found, "-L"], capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT_S
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"nvidia-smi: {exc}"
    if done.returncode != 0:
        said = (done.stdout + done.stderr).strip().splitlines()
        return 0, f"nvidia-smi failed: {said[-1] if said else f'exit code {done.returncode}'}"
    return sum(1 for line in done.stdout.splitlines() if line.startswith("GPU ")), None


def visible_gpus() -> dict[str, object]:
    """The answer `agent gpus` prints as JSON."""
    seen, torch_error = torch_gpus()
    listed, smi_error = nvidia_smi_gpus()
    return {
        "torch": seen,
        "torch_error": torch_error,
        "nvidia_smi": listed,
        "nvidia_smi_error": smi_error,
    }
