"""The four reserved token ids, shared by every floor.

The tokenizers map their special pieces to them, the data pipeline frames
with them, the model masks padding id 0, and the decoding loops start with
START and stop at END.
"""

PAD_ID = 0
UNK_ID = 1
START_ID = 2
END_ID = 3
RESERVED_TOKENS = ("[PAD]", "[UNK]", "[START]", "[END]")
