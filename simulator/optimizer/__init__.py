"""The capture-size optimizer: exact interval DP / label search and the Pareto front."""
