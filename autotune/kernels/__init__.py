"""Host side of the built-in kernels: inputs and references, one module per kernel."""
