"""Is a token split big enough for the run? The one owner of that rule (torch-free).

``orchestrator validate`` asks it (trainer/datacheck.py) wherever the token counts are known
without tokenising (a ``tokens`` .bin file, text read with the byte tokenizer); the trainer asks
it again with the real counts when it opens the data (trainer/batches.py), before the engine
starts. Both therefore refuse the same runs with the same sentence.

A window is ``seq_len + 1`` tokens (inputs plus the shifted targets). Training draws windows at
random offsets, so it needs one window; evaluation reads ``eval_batches`` x ``batch_size``
*distinct* windows laid end to end in the held-out split. Fewer held-out windows than that
would silently repeat some of them (the old modulo wrap) and make ``val/loss`` a weighted mean
of fewer sequences than the config claims.
"""

from __future__ import annotations


def split_problem(where: str, n_train: int, n_val: int, seq_len: int, *, batch_size: int = 1,
                  eval_batches: int = 1, val_key: str = "data.val_fraction") -> str | None:
    """One sentence naming ``where`` and what to change, or None when the split fits.

    ``val_key``: the key that sets the held-out share, named in the advice.
    """
    window = seq_len + 1
    if n_train < window:
        return (f"{where}: {n_train} training tokens are too few for train.seq_len {seq_len}: "
                f"need at least {window} (more data, or a smaller train.seq_len)")
    have = n_val // window  # distinct held-out windows
    if have >= eval_batches * batch_size:
        return None
    if have == 0:
        return (f"{where}: the held-out split has {n_val} tokens, fewer than one window of "
                f"train.seq_len + 1 = {window} tokens; raise {val_key}, add data, or lower "
                f"train.seq_len")
    if have < batch_size:
        return (f"{where}: the held-out split has {n_val} tokens, {have} window(s) of "
                f"train.seq_len + 1 = {window} tokens, fewer than one evaluation batch "
                f"(train.batch_size {batch_size}); raise {val_key}, add data, or lower "
                f"train.seq_len or train.batch_size")
    return (f"{where}: the held-out split has {n_val} tokens, {have} windows of "
            f"train.seq_len + 1 = {window} tokens, but train.eval_batches {eval_batches} x "
            f"train.batch_size {batch_size} asks for {eval_batches * batch_size} distinct "
            f"windows; lower train.eval_batches to at most {have // batch_size} or raise "
            f"{val_key}")
