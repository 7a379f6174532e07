"""Helpers the tests share: synthesized videos, checkpoints, fake engines, real servers and streams."""
