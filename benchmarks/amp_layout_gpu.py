"""Mixed precision's speed-up on a real GPU by memory layout (issue #35): torchvision's
ResNet-50, 224x224, batch 256, eager PyTorch, one training step (SGD with momentum) timed
over 20 steps after 6 warm-ups, in fp32 (no TF32), tf32 (PyTorch's default for cuDNN plus
TF32 matrix products: the plan's float32 baseline on Ampere and later), bf16 and fp16
autocast (fp16 with GradScaler), each in NCHW and in channels-last (NHWC).

Needs a CUDA GPU (the repository's tests never run it). Prints ms per step, images/s and the
bf16/fp16 speed-ups over tf32 measured in this one run:

    python benchmarks/amp_layout_gpu.py
"""

from __future__ import annotations

import time

import torch
import torchvision

BATCH, STEPS, WARM = 256, 20, 6


def step_s(mode: str, channels_last: bool) -> float:
    """Seconds per training step of ResNet-50 in ``mode`` (fp32, tf32, bf16, fp16)."""
    torch.manual_seed(0)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    model = torchvision.models.resnet50().cuda().to(memory_format=fmt)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(BATCH, 3, 224, 224, device="cuda").to(memory_format=fmt)
    y = torch.randint(0, 1000, (BATCH,), device="cuda")
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(mode)
    scaler = torch.amp.GradScaler("cuda") if mode == "fp16" else None

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()

    for _ in range(WARM):
        step()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(STEPS):
        step()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / STEPS


def main() -> None:
    torch.backends.cudnn.benchmark = True
    print(torch.__version__, torch.cuda.get_device_name())
    seconds = {}
    for mode in ("fp32", "tf32", "bf16", "fp16"):
        for channels_last in (False, True):
            torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
            torch.backends.cudnn.allow_tf32 = mode != "fp32"
            s = seconds[mode, channels_last] = step_s(mode, channels_last)
            layout = "NHWC" if channels_last else "NCHW"
            print(f"{mode:5s} {layout} {s * 1e3:7.1f} ms/step {BATCH / s:7.0f} img/s", flush=True)
    for channels_last in (False, True):
        base = seconds["tf32", channels_last]
        print(
            f"speed-up over tf32, {'NHWC' if channels_last else 'NCHW'}: "
            f"bf16 {base / seconds['bf16', channels_last]:.2f}, "
            f"fp16 {base / seconds['fp16', channels_last]:.2f}"
        )


if __name__ == "__main__":
    main()
