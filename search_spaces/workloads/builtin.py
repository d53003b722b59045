"""The built-in workloads (METHOD.md section 6). Registering them imports no framework."""

from __future__ import annotations

from advisor.search_spaces.workloads._registry import Workload, register

_PKG = "advisor.search_spaces.workloads"

FCN = register(
    Workload(
        name="fcn",
        task="binary: is a diffraction-hyperbola apex at the centre of a seismic patch",
        input_shape=(1, 64, 64),
        n_classes=2,
        n_train=40_512,
        n_val=212,
        builders={"torch": f"{_PKG}.fcn:build_torch"},
        recipe="momentum SGD, lr 0.1 decaying to 0.01, early stop after 5 epochs without gain",
        data="synthetic seismic patches (noise + diffraction hyperbolas), generated, seeded",
        epochs_to_stabilise={256: 13, 512: 14, 1024: 14, 2048: 16},
    )
)

SIMPLE_CNN = register(
    Workload(
        name="simple-cnn",
        task="10-class handwritten digits",
        input_shape=(1, 28, 28),
        n_classes=10,
        n_train=60_000,
        n_val=10_000,
        builders={"torch": f"{_PKG}.simple_cnn:build_torch"},
        recipe="Adadelta, lr 1.0",
        data="scikit-learn's 8x8 digits resized to 28x28 with random shifts and noise",
        epochs_to_stabilise={256: 15, 512: 17, 1024: 22, 2048: 28},
    )
)
