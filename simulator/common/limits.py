"""Caps on sizes a user can ask for. Each is far above any real deployment and keeps one run within memory and
a few minutes; inputs above a cap are refused with one line instead of hanging or running out of memory."""

MAX_BATCH = 16_384  # sequences in one step, capture sizes, batch sizes in a distribution
MAX_OPTIMIZE_SIZE = 4_096  # candidate capture sizes of `optimize` (1..max size; time and memory grow ~ n^2)
MAX_CTX = 1 << 24  # tokens of context, prompt or output lengths
MAX_LAYERS = 1_000  # decoder layers of a model
MAX_DIM = 1 << 20  # hidden, intermediate sizes, vocabulary, heads x head_dim
MAX_TOY_KERNELS = 1_000_000  # kernels of one toy case (layers x kernels per layer)
MAX_REPLICATES = 1_000  # host-noise replicates
MAX_SEED = 2**63 - 1
MAX_BYTES = 1 << 60  # byte budgets (an exbibyte)
MAX_US = 1e9  # any per-kernel or per-launch time, µs (1000 s)
MAX_RATE = 1e9  # requests/s
MAX_SECONDS = 1e7  # simulated seconds (about 116 days)
MAX_WORKERS = 1_024
