"""Joader: shared data preparation for concurrent deep-learning jobs.

    import joader
    client = joader.Client()                       # $JOADER_SOCKET or the default socket
    client.add_dataset("train", source="imagefolder:/data/train", resize=256, crop=224)
    for batch in joader.Loader("train", batch_size=256, epochs=90):
        batch.indices, batch.labels, batch.data    # int64 [B], int64 [B], uint8 [B, H, W, C]

See joader.torch.DataLoader for a drop-in replacement of torch.utils.data.DataLoader.
"""
from ._native import JoaderError
from .client import Client, dataset_name
from .loader import Batch, Loader

__all__ = ["Batch", "Client", "JoaderError", "Loader", "dataset_name"]
