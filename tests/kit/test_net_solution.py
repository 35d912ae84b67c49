"""The solution's network on the device (simulator here) against the CPU reference."""

import numpy as np
import pytest

from nnkit import dataset, network
from nnkit.submission import NAMED
from nnkit.training import DeviceRunner, ReferenceRunner, TrainConfig, make_gemm, train


@pytest.fixture(scope="module")
def tiny_data():
    return dataset.load(dataset.SAMPLE, val_fraction=0.2, seed=1, pool=4, limit=50)


@pytest.mark.parametrize("hidden", [(6,), (5, 4)], ids=["1 hidden", "2 hidden"])
def test_training_on_the_device_follows_the_reference(tiny_data, hidden):
    config = TrainConfig(hidden, batch=16, epochs=1, lr=0.3, lam=1e-2)
    params = network.glorot_uniform(config.sizes(tiny_data.features), seed=2)
    reference = ReferenceRunner(params.copy(), config)
    device = DeviceRunner(NAMED["solution"], params.copy(), config,
                          make_gemm("host", NAMED["solution"]))
    h_ref = train(reference, tiny_data, config)
    h_dev = train(device, tiny_data, config)
    for key, ref in reference.params().named().items():
        got = device.params().named()[key]
        assert np.abs(got - ref).max() <= 1e-4 * np.abs(ref).max(), key
    assert h_dev.epochs[0].loss == pytest.approx(h_ref.epochs[0].loss, rel=1e-5)
    assert h_dev.epochs[0].val_accuracy == h_ref.epochs[0].val_accuracy


def test_device_runner_rejects_mse():
    config = TrainConfig((4,), loss="mse")
    with pytest.raises(ValueError, match="cross-entropy"):
        DeviceRunner(NAMED["solution"], network.glorot_uniform([9, 4, 10], 0), config,
                     make_gemm("host", NAMED["solution"]))


def test_batch_order_is_a_function_of_seed_and_epoch():
    a, b = dataset.epoch_order(100, 7, 3), dataset.epoch_order(100, 7, 3)
    assert np.array_equal(a, b) and not np.array_equal(a, dataset.epoch_order(100, 7, 4))
    slices = dataset.batch_slices(81, 20)
    assert [s.stop - s.start for s in slices] == [20, 20, 20, 20, 1]


def test_pooling_averages_patches():
    images = np.arange(2 * 784, dtype=np.float32).reshape(2, 784)
    pooled = dataset.pool_images(images, 4)
    assert pooled.shape == (2, 49)
    assert pooled[0, 0] == pytest.approx(images[0].reshape(28, 28)[:4, :4].mean())
    with pytest.raises(ValueError):
        dataset.pool_images(images, 5)
