"""Training without a configuration framework: the Python API of ``dandelion-train``.

* :func:`train`: ``train(model, train_data, valid_data=None, options=None, *, run_dir, seed, device, resume,
  **options)`` -> :class:`TrainResult` (``.model``, ``.history``; unpacks as ``model, history``);
* :class:`Trainer`: the same run as an object (:meth:`Trainer.fit`, :meth:`Trainer.validate`, :meth:`Trainer.save`);
* :class:`TrainOptions` (with :class:`FinetuneOptions`): every option of ``configs/trainer/default.yaml``, same names
  and defaults, checked on construction (:class:`OptionError` names the option);
* :func:`parameter_hash`: SHA-256 of a model's state, for bit-exact comparisons;
* :mod:`dandelion.training.schedule`: learning-rate schedule, data order and phases; :mod:`dandelion.training.resume`:
  what a checkpoint saves and restores.

``dandelion-train`` (:mod:`dandelion.cli.train`) builds these from its hydra configuration; nothing here imports
hydra or omegaconf.
"""

from dandelion.training.inputs import model_channels
from dandelion.training.options import FinetuneOptions, OptionError, TrainOptions
from dandelion.training.run import TrainResult, train
from dandelion.training.trainer import Trainer, parameter_hash

__all__ = [
    "train",
    "TrainResult",
    "Trainer",
    "TrainOptions",
    "FinetuneOptions",
    "OptionError",
    "model_channels",
    "parameter_hash",
]
