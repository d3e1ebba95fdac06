"""The checkpoint-chain engine both checkpoint front doors share: what a stored row of a
chain holds (a delta or splice against its parent, compressed), and its codec."""
