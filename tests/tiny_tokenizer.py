"""The start of every tiny-model build script the real-server fixtures run (tests/vllm_cpu.py,
tests/transformers_serve.py): a seeded torch, and a WordLevel tokenizer in which every word `w0..w999`
and a few plain words are exactly one token, with a plain chat template. Each fixture appends its own
model configs. Kept byte-identical to what both scripts wrote before, so cached models stay valid.
"""

TOKENIZER_PRELUDE = r'''out = Path(sys.argv[1])
torch.manual_seed(0)
words = ["<unk>", "<s>", "</s>"] + [f"w{i}" for i in range(1000)] + (
    "the a of and to in is that it was for on with as by at from this be or are an he she they we you i "
    "what how why when who hello world model tell me story about spark fast slow token".split())
vocab = {}
for w in words:
    vocab.setdefault(w, len(vocab))
tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
template = ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }} {% endfor %}"
            "{% if add_generation_prompt %}assistant: {% endif %}")
'''
