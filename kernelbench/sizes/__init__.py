"""CPU sizes of tasks: probing a reference in the sandbox, deriving the size that fits the budget, the cost model."""
