# SPDX-License-Identifier: Apache-2.0
"""A MultiWorkerMirroredStrategy training loop whose all-reduces use NCCL.

Synthetic data and a dense model; run one copy per worker (tf-crux.sh sets
TF_CONFIG). With --mark, each step start is announced to the Crux preload
through crux_iteration_mark() when the preload is loaded.
"""
import argparse
import ctypes

import tensorflow as tf


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--width", type=int, default=4096)
    p.add_argument("--mark", action="store_true")
    a = p.parse_args()

    opts = tf.distribute.experimental.CommunicationOptions(
        implementation=tf.distribute.experimental.CommunicationImplementation.NCCL)
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=opts)
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.layers.Dense(a.width, activation="relu")
                                     for _ in range(6)] + [tf.keras.layers.Dense(10)])
        model.compile(optimizer="sgd", loss="mse")
    callbacks = []
    if a.mark:
        try:
            mark = ctypes.CDLL(None).crux_iteration_mark

            class Mark(tf.keras.callbacks.Callback):
                def on_train_batch_begin(self, batch, logs=None):
                    mark()
            callbacks.append(Mark())
        except AttributeError:
            pass
    x = tf.random.normal((64 * a.steps, a.width))
    y = tf.random.normal((64 * a.steps, 10))
    model.fit(x, y, batch_size=64, epochs=1, callbacks=callbacks, verbose=2)


if __name__ == "__main__":
    main()
