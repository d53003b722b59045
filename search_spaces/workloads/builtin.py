"""The built-in workloads (docs/method.md section 6). Registering them imports no framework."""

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
        builders={"torch": f"{_PKG}.fcn:build_torch", "keras": f"{_PKG}.fcn_keras:build_keras"},
        recipe="momentum SGD, lr 0.1 decaying to 0.01, early stop after 5 epochs without gain",
        data="synthetic seismic patches (noise + diffraction hyperbolas), generated, seeded",
        epochs_to_stabilise={256: 13, 512: 14, 1024: 14, 2048: 16},
        parameters=145_570,
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
        builders={
            "torch": f"{_PKG}.simple_cnn:build_torch",
            "keras": f"{_PKG}.simple_cnn_keras:build_keras",
        },
        recipe="Adadelta, lr 1.0",
        data="scikit-learn's 8x8 digits resized to 28x28 with random shifts and noise",
        epochs_to_stabilise={256: 15, 512: 17, 1024: 22, 2048: 28},
        parameters=1_199_882,
    )
)

# Engineer E's workloads: each has a PyTorch and a Keras version of the same network.
_CIFAR = "generated CIFAR-10 shaped images (class prototypes + noise), seeded"

RESNET50 = register(
    Workload(
        name="resnet50",
        task="10-class images (CIFAR-10 shape)",
        input_shape=(3, 32, 32),
        n_classes=10,
        n_train=50_000,
        n_val=10_000,
        builders={
            "torch": f"{_PKG}.resnet50:build_torch",
            "keras": f"{_PKG}.resnet50_keras:build_keras",
        },
        recipe=(
            "ResNet-50 (bottleneck 3-4-6-3); momentum SGD 0.9, lr 0.1 decaying (cosine) to "
            "0.002, weight decay 5e-4; ranges: lr 0.01-0.3 log, momentum 0.8-0.95, "
            "weight_decay 1e-5-1e-3 log, batch 32-512"
        ),
        data=_CIFAR + "; CIFAR-10 sizes 50,000 / 10,000",
        default_batch_sizes=(32, 64, 128, 256),
        default_epochs=30,
        parameters=23_555_082,
    )
)

VGG1 = register(
    Workload(
        name="vgg-1",
        task="10-class images at 32x32 (CIFAR-10 shape)",
        input_shape=(3, 32, 32),
        n_classes=10,
        n_train=50_000,
        n_val=10_000,
        builders={
            "torch": f"{_PKG}.vgg:build_vgg1_torch",
            "keras": f"{_PKG}.vgg_keras:build_vgg1_keras",
        },
        recipe=(
            "small VGG stack (2 blocks of 2 convs: 32, 64; dense 128, dropout 0.5); "
            "momentum SGD lr 0.01, momentum 0.9, batch 128, 10 epochs; ranges: lr 1e-3-0.1 log, "
            "momentum 0.8-0.95, dropout 0.2-0.6, batch 32-512"
        ),
        data=_CIFAR + "; CIFAR-10 sizes 50,000 / 10,000",
        default_batch_sizes=(64, 128, 256, 512),
        default_epochs=10,
        parameters=591_274,
    )
)

VGG2 = register(
    Workload(
        name="vgg-2",
        task="10-class images at 64x64 (CIFAR-10 upscaled)",
        input_shape=(3, 64, 64),
        n_classes=10,
        n_train=50_000,
        n_val=10_000,
        builders={
            "torch": f"{_PKG}.vgg:build_vgg2_torch",
            "keras": f"{_PKG}.vgg_keras:build_vgg2_keras",
        },
        recipe=(
            "deeper VGG stack (4 blocks of 2 convs: 32, 64, 128, 256; dense 256, dropout 0.5); "
            "momentum SGD lr 0.01, momentum 0.9, batch 128, 10 epochs; ranges: lr 1e-3-0.1 log, "
            "momentum 0.8-0.95, dropout 0.2-0.6, batch 32-512"
        ),
        data=_CIFAR + " at 64x64; CIFAR-10 sizes 50,000 / 10,000",
        default_batch_sizes=(64, 128, 256, 512),
        default_epochs=10,
        parameters=2_223_658,
    )
)

GOOGLENET = register(
    Workload(
        name="googlenet",
        task="binary chest X-ray classification (pneumonia or not)",
        input_shape=(3, 224, 224),
        n_classes=2,
        n_train=5_216,
        n_val=624,
        builders={
            "torch": f"{_PKG}.googlenet:build_torch",
            "keras": f"{_PKG}.googlenet_keras:build_keras",
        },
        recipe=(
            "GoogLeNet (9 inception blocks, GAP, dropout 0.4); Adam lr 1e-4, batch 16; "
            "ranges: lr 1e-5-1e-3 log, dropout 0.2-0.6, batch 8-64"
        ),
        data=(
            "generated 224x224x3 two-class images; sizes of the published chest X-ray "
            "pneumonia set (Kermany et al. 2018): 5,216 train / 624 test"
        ),
        default_batch_sizes=(8, 16, 32, 64),
        default_epochs=10,
        parameters=5_975_602,
    )
)

LSTM = register(
    Workload(
        name="lstm",
        task="word-level language model (next-token prediction)",
        input_shape=(35,),
        n_classes=10_000,
        n_train=26_559,
        n_val=2_107,
        builders={
            "torch": f"{_PKG}.lstm:build_torch",
            "keras": f"{_PKG}.lstm_keras:build_keras",
        },
        recipe=(
            "2-layer LSTM, hidden 200 (650 for the medium model), vocabulary 10,000, 35 steps; "
            "Adam lr 1e-3 (Zaremba et al.: SGD lr 1, clip 5, 13 epochs); ranges: lr 1e-4-1e-2 "
            "log, dropout 0-0.5, hidden 200-650, batch 16-128"
        ),
        data=(
            "generated Zipfian tokens with successor structure; Penn Treebank sizes: "
            "929,589 / 73,760 tokens = 26,559 / 2,107 sequences of 35"
        ),
        default_batch_sizes=(20, 32, 64, 128),
        default_epochs=13,
        parameters=4_651_600,
    )
)
