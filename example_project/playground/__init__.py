"""The example site's agent playground: chat with an agent and watch the memory layer work."""
