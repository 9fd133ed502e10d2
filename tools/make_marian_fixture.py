"""Write tests/fixtures/marian_tiny/: a tiny random OPUS-MT-shaped checkpoint and what HF makes of it.

Runs with the `marian-reference` extra (torch, transformers, sentencepiece):

    python tools/make_marian_fixture.py [--out tests/fixtures/marian_tiny]

It trains two small SentencePiece models (an English-ish source, a
German-ish target) on generated sentences, writes a Marian vocab.json (one
joint vocabulary, `</s>` 0, `<unk>` 1, the pieces in a shuffled order, two
language codes, `<pad>` last; one rare source piece is left out so that it
reads as `<unk>`), builds a random MarianMTModel of OPUS-MT's architecture
(post-norm, swish, shared and tied embeddings, sinusoids in halves, a
non-zero final_logits_bias) and saves it with `save_pretrained`
(safetensors) and `MarianTokenizer.save_pretrained`.

`reference.json` and `reference.npz` hold, for a padded batch of 4 sentences:
the tokenizer's input ids, teacher-forced logits, and `generate` outputs
(greedy and beam 4) with the generation settings of a real OPUS-MT
checkpoint (bad_words_ids [[pad]], decoder_start_token_id pad,
length_penalty 1, early_stopping False) except `forced_eos_token_id`, which
is disabled (recorded as null): keras_tf does not force END at the last
step, see docs/pretrained.md.
"""

import argparse
import io
import json
import os
import random

import numpy as np
import sentencepiece
import torch
from transformers import GenerationConfig, MarianConfig, MarianMTModel, MarianTokenizer

SEED = 11
MAX_NEW_TOKENS = 12
SOURCES = [
    "the well-known cat doesn't sleep",
    "I saw 3 red dogs in 2024.",
    ">>deu<< a small house",
    "hello",
]
TARGETS = [
    "die bekannte Katze schläft nicht",
    "ich sah 3 rote Hunde im Jahr 2024.",
    "ein kleines Haus",
    "hallo",
]
LANGUAGE_CODES = [">>deu<<", ">>nld<<"]

ENGLISH = {
    "subjects": ["the cat", "a dog", "my friend", "the teacher", "I", "we", "they", "the well-known cat"],
    "verbs": ["sees", "doesn't like", "finds", "can't open", "paints", "sleeps near", "buys"],
    "objects": ["the house", "a red door", "3 books", "the garden", "2 old cars", "a small boat",
                "the mother-in-law", "12 apples"],
    "ends": ["", " today", " in 2024", " again", " at 7", "."],
}
GERMAN = {
    "subjects": ["die Katze", "ein Hund", "mein Freund", "der Lehrer", "ich", "wir", "sie"],
    "verbs": ["sieht", "mag nicht", "findet", "kann nicht öffnen", "malt", "schläft bei", "kauft"],
    "objects": ["das Haus", "eine rote Tür", "3 Bücher", "den Garten", "2 alte Autos",
                "ein kleines Boot", "die Schwieger-Mutter", "12 Äpfel"],
    "ends": ["", " heute", " im Jahr 2024", " wieder", " um 7", "."],
}


def sentences(words, count, rng):
    return [
        f"{rng.choice(words['subjects'])} {rng.choice(words['verbs'])} "
        f"{rng.choice(words['objects'])}{rng.choice(words['ends'])}"
        for _ in range(count)
    ]


def train_spm(texts, vocabulary_size):
    writer = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(texts), model_writer=writer, vocab_size=vocabulary_size,
        model_type="unigram", character_coverage=1.0, hard_vocab_limit=False,
        # Marian's SentencePiece models: <unk> 0, <s> 1, </s> 2, no <pad>.
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1, minloglevel=2,
    )
    return writer.getvalue()


def pieces_of(proto):
    processor = sentencepiece.SentencePieceProcessor(model_proto=proto)
    return [processor.id_to_piece(i) for i in range(processor.get_piece_size())
            if not (processor.is_control(i) or processor.is_unknown(i))]


def randomize(model, generator):
    """Weights large enough that the output depends on the input (HF's init_std 0.02 gives ~uniform logits)."""
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "embed_positions" in name:
                continue  # the fixed sinusoids, recomputed on loading (not saved)
            if "layer_norm" in name:
                base = 1.0 if name.endswith("weight") else 0.0
                parameter.copy_(base + 0.1 * torch.randn(parameter.shape, generator=generator))
            elif name.endswith("bias"):
                parameter.copy_(0.1 * torch.randn(parameter.shape, generator=generator))
            elif "shared" in name:
                parameter.copy_(0.5 * torch.randn(parameter.shape, generator=generator))
            else:
                parameter.copy_(1.0 * torch.randn(parameter.shape, generator=generator))
        # A trained-looking bias: random, and </s> likelier, so some outputs end early.
        bias = 0.5 * torch.randn(model.final_logits_bias.shape, generator=generator)
        bias[0, model.config.eos_token_id] += 1.0
        model.final_logits_bias.copy_(bias)


def teacher_forced_log_prob(model, input_ids, attention_mask, generated, pad_id, eos_id):
    """Sum over the generated tokens (through the first </s>) of log_softmax(logits)[token]."""
    with torch.no_grad():
        logits = model(input_ids=input_ids, attention_mask=attention_mask,
                       decoder_input_ids=generated[:, :-1]).logits
    log_probs = torch.log_softmax(logits.float(), dim=-1)
    targets = generated[:, 1:]
    picked = log_probs.gather(-1, targets[..., None])[..., 0]
    # Tokens after the first </s> are padding.
    ended = torch.cumsum((targets == eos_id).int(), dim=1)
    keep = (ended == 0) | ((ended == 1) & (targets == eos_id))
    return (picked * keep).sum(dim=1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(
        os.path.dirname(__file__), "..", "tests", "fixtures", "marian_tiny"))
    out = parser.parse_args().out
    os.makedirs(out, exist_ok=True)
    rng = random.Random(SEED)
    torch.manual_seed(SEED)

    # --- tokenizers ---
    source_proto = train_spm(sentences(ENGLISH, 400, rng) + SOURCES[:2] + SOURCES[3:], 120)
    target_proto = train_spm(sentences(GERMAN, 400, rng) + TARGETS, 120)
    source_pieces, target_pieces = pieces_of(source_proto), pieces_of(target_proto)
    joint = list(dict.fromkeys(source_pieces + target_pieces))
    left_out = source_pieces[-1]  # the last (rarest) source piece reads as <unk>
    joint.remove(left_out)
    rng.shuffle(joint)
    vocabulary = ["</s>", "<unk>"] + joint + LANGUAGE_CODES + ["<pad>"]
    with open(os.path.join(out, "source.spm"), "wb") as file:
        file.write(source_proto)
    with open(os.path.join(out, "target.spm"), "wb") as file:
        file.write(target_proto)
    with open(os.path.join(out, "vocab.json"), "w", encoding="utf-8") as file:
        json.dump({piece: i for i, piece in enumerate(vocabulary)}, file, ensure_ascii=False, indent=1)
    tokenizer = MarianTokenizer(
        os.path.join(out, "source.spm"), os.path.join(out, "target.spm"),
        os.path.join(out, "vocab.json"), source_lang="en", target_lang="de", model_max_length=64,
    )
    tokenizer.save_pretrained(out)

    # --- model ---
    pad_id, eos_id = len(vocabulary) - 1, 0
    config = MarianConfig(
        vocab_size=len(vocabulary), decoder_vocab_size=len(vocabulary), d_model=16,
        encoder_layers=2, decoder_layers=2, encoder_attention_heads=2, decoder_attention_heads=2,
        encoder_ffn_dim=32, decoder_ffn_dim=32, activation_function="swish",
        max_position_embeddings=64, pad_token_id=pad_id, eos_token_id=eos_id,
        decoder_start_token_id=pad_id, forced_eos_token_id=None, scale_embedding=True,
        share_encoder_decoder_embeddings=True, tie_word_embeddings=True,
        normalize_before=False, static_position_embeddings=True,
    )
    model = MarianMTModel(config).eval()
    generator = torch.Generator().manual_seed(SEED)
    randomize(model, generator)
    generation = GenerationConfig(
        bad_words_ids=[[pad_id]], decoder_start_token_id=pad_id, eos_token_id=eos_id,
        pad_token_id=pad_id, forced_eos_token_id=None, max_length=64, num_beams=4,
        length_penalty=1.0, early_stopping=False, renormalize_logits=False,
    )
    model.generation_config = generation
    model.save_pretrained(out, safe_serialization=True)
    # The reference comes from the saved files, as any reader loads them.
    model = MarianMTModel.from_pretrained(out).eval()

    # --- reference outputs ---
    batch = tokenizer(SOURCES, text_target=TARGETS, padding=True, return_tensors="pt")
    labels = batch["labels"]
    decoder_input_ids = torch.cat(
        [torch.full((labels.shape[0], 1), pad_id), labels[:, :-1]], dim=1)
    with torch.no_grad():
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                       decoder_input_ids=decoder_input_ids).logits.float().numpy()
    runs = {}
    for name, beams in (("greedy", 1), ("beam4", 4)):
        with torch.no_grad():
            result = model.generate(
                input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                num_beams=beams, do_sample=False, max_new_tokens=MAX_NEW_TOKENS,
                output_scores=True, return_dict_in_generate=True,
            )
        sequences = result.sequences
        log_probs = teacher_forced_log_prob(
            model, batch["input_ids"], batch["attention_mask"], sequences, pad_id, eos_id)
        runs[name] = {
            # HF ids, the decoder start (pad) first; padded with pad after </s>.
            "ids": sequences.tolist(),
            "texts": tokenizer.batch_decode(sequences, skip_special_tokens=True),
            "log_probs": log_probs.tolist(),
        }
        if beams > 1:
            runs[name]["sequences_scores"] = result.sequences_scores.tolist()
    reference = {
        "sources": SOURCES,
        "targets": TARGETS,
        "left_out_piece": left_out,
        "input_ids": batch["input_ids"].tolist(),
        "labels": labels.tolist(),
        "generation": {
            "max_new_tokens": MAX_NEW_TOKENS, "bad_words_ids": [[pad_id]],
            "decoder_start_token_id": pad_id, "forced_eos_token_id": None,
            "length_penalty": 1.0, "early_stopping": False,
        },
        "greedy": runs["greedy"],
        "beam4": runs["beam4"],
        "versions": {"torch": torch.__version__, "transformers": __import__("transformers").__version__,
                     "sentencepiece": sentencepiece.__version__},
    }
    with open(os.path.join(out, "reference.json"), "w", encoding="utf-8") as file:
        json.dump(reference, file, ensure_ascii=False, indent=1)
        file.write("\n")
    np.savez_compressed(os.path.join(out, "reference.npz"), logits=logits.astype("float32"))
    print(json.dumps({k: reference[k] for k in ("greedy", "beam4")}, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
