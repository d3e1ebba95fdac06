"""The checkpoint-chain engine of DeltaCheckpointer and DjangoSaver: splices, equality,
codecs, the parent walk (see docs/design/checkpoint-chains.md). No Django here.
"""
