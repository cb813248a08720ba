"""The registry of the book's data sets (and of the released model files that chapter
21 loads, `MODELS`): for each, its pinned URL, the SHA-256 and size of every form
it may be stored in, its licence and the credit line to show where it is used."""

from __future__ import annotations

from dataclasses import dataclass

from lecturelib.validate import check_type


@dataclass(frozen=True)
class LocalForm:
    """One way a data set may be stored on disk: a relative path, the SHA-256 of its bytes and
    their number (`size`; `None` where it is not registered)."""

    file: str
    sha256: str
    gzipped: bool = False
    size: int | None = None


@dataclass(frozen=True)
class Dataset:
    """A registered file: where it comes from, how it is checked, who to credit."""

    name: str
    forms: tuple[LocalForm, ...]  # the first is what a download produces
    url: str
    licence: str
    attribution: str
    zip_sha256: str | None = None  # set when the URL serves a zip holding the file
    zip_member: str | None = None

    @property
    def file(self) -> str:
        return self.forms[0].file


_GH = "https://raw.githubusercontent.com"
_TATOEBA = (
    "English–French sentence pairs from the Tatoeba Project (tatoeba.org), packaged by "
    "www.manythings.org/anki; licence CC BY 2.0 FR"
)
_UCI = (
    "Sentiment Labelled Sentences (Kotzias, Denil, de Freitas and Smyth, KDD 2015), UCI "
    "Machine Learning Repository; licence CC BY 4.0"
)
_MR = (
    "Sentence Polarity Dataset v1.0 (Pang and Lee, ACL 2005), as packaged by NLTK; "
    "licence CC BY 4.0"
)
_POLARITY_ZIP = (
    f"{_GH}/nltk/nltk_data/5db857e6f7df11eabb5e5665836db9ec8df07e28/packages/"
    "corpora/sentence_polarity.zip"
)
_POLARITY_ZIP_SHA = "6e1ed4405b65c7eabf1d199a7f7c437091ac21da0ea7467b410a74062574566b"
_SENTIMENT = (
    f"{_GH}/Finesomtoe/sentimentanalysis/f045de94a831226fe5edd31d725c7f4937f1631b"
)

_GUTENBERG = {  # name: (file, repo @ commit, sha256, title)
    "alice": (
        "11-0.txt",
        "Alice-s-Adventures-in-Wonderland_11",
        "7f18748e114b994d5d9454d5793581bc0b9cf9d7",
        "49a0b2726606e1290ac03a63978fa1dd1bd38a8d805704d98265f393533ea094",
        "Lewis Carroll, Alice's Adventures in Wonderland (PG #11)",
    ),
    "pride-and-prejudice": (
        "1342-0.txt",
        "Pride-and-Prejudice_1342",
        "81db45c9c48c592f0b77f01fc59e677ad0a5634e",
        "48e0522844402a86a3ea98f0947ba85ea54838db3c59022299298ed968a5a163",
        "Jane Austen, Pride and Prejudice (PG #1342)",
    ),
    "great-expectations": (
        "1400-0.txt",
        "Great-Expectations_1400",
        "889db0e100928a957f469bf834c564d04065c8e6",
        "b58ce42c630e06314f2442d5937fa8a8556b6e3c5c16f4713c7332a4bb50b420",
        "Charles Dickens, Great Expectations (PG #1400)",
    ),
    "sherlock-holmes": (
        "1661.txt",
        "The-Adventures-of-Sherlock-Holmes_1661",
        "7e5dd2703fbf503c004063e96ab7c61262375e5f",
        "2a0ce5568625a304f54fbb6bfdeeadf527a1437254b5f0e06b5a9e233d4784a2",
        "Arthur Conan Doyle, The Adventures of Sherlock Holmes (PG #1661)",
    ),
    "war-and-peace": (
        "2600-0.txt",
        "War-and-Peace_2600",
        "fa22ab90f00f627e83d14acabe32d91602d2365d",
        "6cbcc5ca5e590fb9ace161a5b93e4ecf280d7118104be0d63b686c004cfa70ae",
        "Leo Tolstoy, War and Peace, tr. Louise and Aylmer Maude (PG #2600)",
    ),
    "moby-dick": (
        "2701-0.txt",
        "Moby-Dick--Or-The-Whale_2701",
        "bdf1948e6cd00963730971e5624e764a35f238c3",
        "baf9b04fcf6e0008f30eaaa6697277751448c1070b20175e0082f28cbb161fd3",
        "Herman Melville, Moby Dick; or The Whale (PG #2701)",
    ),
    "frankenstein": (
        "84-0.txt",
        "Frankenstein_84",
        "c98a483bd1f34e7366126b81bcedd1a6faee636e",
        "c29a4f56dd91aa894a3f17d5f96b356ccb499e3e2c5a27964de911845e39efab",
        "Mary Wollstonecraft Shelley, Frankenstein (PG #84)",
    ),
    "tale-of-two-cities": (
        "98-0.txt",
        "A-Tale-of-Two-Cities_98",
        "0f6111bc7237af7375295ec1754c2e57e19f67f1",
        "2fcfa071498b30724bd1bd714ba89e38477d632b86d74e87559f6259d3917e36",
        "Charles Dickens, A Tale of Two Cities (PG #98)",
    ),
}


# GPT-2 small (124M) as OpenAI released it, from the Hugging Face Hub at a pinned
# commit (chapter 21). Checksums: the SHA-256 of each file at that commit (the Hub's LFS
# pointer for model.safetensors; config.json and tokenizer.json as recorded by
# independent projects that pin the same revision).
GPT2_REVISION = "607a30d783dfa663caf39e06633721c8d4cfcd7e"
_GPT2 = f"https://huggingface.co/openai-community/gpt2/resolve/{GPT2_REVISION}"
_GPT2_FILES = {  # name: (file, sha256, bytes)
    "gpt2/config": (
        "config.json",
        "0daed7749b4f02b8f76240d5444551d7b08712dab4d0adb8239c56ba823bb7b4",
        665,
    ),
    "gpt2/tokenizer": (
        "tokenizer.json",
        "8414cab924d8b9b33013f0d221c5862f365ee9be39c5c2bfae8a5a9e970478a6",
        1355256,
    ),
    "gpt2/model": (
        "model.safetensors",
        "248dfc3911869ec493c76e65bf2fcf7f615828b0254c12b473182f0f81d3a707",
        548105171,
    ),
}
_GPT2_CREDIT = (
    "GPT-2 (124M) by OpenAI (Radford, Wu, Child, Luan, Amodei and Sutskever, 2019), "
    "from huggingface.co/openai-community/gpt2 at revision "
    f"{GPT2_REVISION[:12]}; licence MIT"
)


_BYTES = {  # the size of every registered file, as in the data README
    "tinyshakespeare.txt": 1115394,
    "fra-eng.txt": 11669748,
    "fra-eng.txt.gz": 3411914,
    "fra-eng_about.txt": 1441,
    "sentiment_labelled_sentences/amazon_cells_labelled.txt": 58226,
    "sentiment_labelled_sentences/imdb_labelled.txt": 85285,
    "sentiment_labelled_sentences/yelp_labelled.txt": 61320,
    "sentence_polarity/rt-polarity.pos": 626334,
    "sentence_polarity/rt-polarity.neg": 612441,
    "gutenberg/11-0.txt": 173595,
    "gutenberg/1342-0.txt": 724725,
    "gutenberg/1400-0.txt": 1049619,
    "gutenberg/1661.txt": 594941,
    "gutenberg/2600-0.txt": 3359542,
    "gutenberg/2701-0.txt": 1276201,
    "gutenberg/84-0.txt": 450783,
    "gutenberg/98-0.txt": 804335,
}


def _form(file: str, sha256: str, gzipped: bool = False) -> LocalForm:
    return LocalForm(file, sha256, gzipped, _BYTES[file])


def _registry() -> dict[str, Dataset]:
    d = [
        Dataset(
            "tinyshakespeare",
            (
                _form(
                    "tinyshakespeare.txt",
                    "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",
                ),
            ),
            f"{_GH}/karpathy/char-rnn/6f9487a6fe5b420b7ca9afb0d7c078e37c1d1b4e/"
            "data/tinyshakespeare/input.txt",
            "public domain text; char-rnn repository MIT",
            "Tiny Shakespeare, prepared by Andrej Karpathy for char-rnn (public domain text)",
        ),
        Dataset(
            "fra-eng",
            (
                _form(
                    "fra-eng.txt",
                    "0bb85dbaa1c896844649094d7eaf2e34bee34e84fe362b26ce7e8f2e12aae104",
                ),
                _form(
                    "fra-eng.txt.gz",
                    "3f7ce9b82d57439edff14f487e2ef9fd52ad72757a838857f153fa4668dd6066",
                    True,
                ),
            ),
            f"{_GH}/modelexlab/data/adddaf33ac35572bcfeb421efec29435e7ea9332/fra.txt",
            "CC BY 2.0 FR",
            _TATOEBA,
        ),
        Dataset(
            "fra-eng-about",
            (
                _form(
                    "fra-eng_about.txt",
                    "79f39a53dbddaf7ab43c801f231089174a611f23987244056f9e3cb5aa79358b",
                ),
            ),
            f"{_GH}/rebirthmonkey/ai-deep-learning/4ab3450d2527dec409ff5bad3b665ecc160af78b/"
            "data/fra-eng/_about.txt",
            "CC BY 2.0",
            _TATOEBA,
        ),
    ]
    for name, sha in (
        (
            "amazon_cells",
            "47003fc0a0d4840b00e96e715b6189bad09e7443a3da41c4cbe12ffc79f86ae3",
        ),
        ("imdb", "aef2e49e3da25714d61175e3a6e68eeef74a20a2f914318dc3be9947ea86512d"),
        ("yelp", "c76468b7b5c6e56a0804d728345c5f84aa2142ddb214420f61cc9cfd4c00d2ea"),
    ):
        file = f"sentiment_labelled_sentences/{name}_labelled.txt"
        d.append(
            Dataset(
                f"sentiment/{name.split('_')[0]}",
                (_form(file, sha),),
                f"{_SENTIMENT}/{file}",
                "CC BY 4.0",
                _UCI,
            )
        )
    for name, sha in (
        ("pos", "c2dc6b2f55bcf725725372916287cc3f8f9b19402edaa9167de5287cb3ade421"),
        ("neg", "614274f81185a850e5a88d533d4679f916d6f62e9af6f0b4ec71fb94bf466ea5"),
    ):
        file = f"sentence_polarity/rt-polarity.{name}"
        d.append(
            Dataset(
                f"polarity/{name}",
                (_form(file, sha),),
                _POLARITY_ZIP,
                "CC BY 4.0",
                _MR,
                zip_sha256=_POLARITY_ZIP_SHA,
                zip_member=file,
            )
        )
    for name, (file, repo, commit, sha, title) in _GUTENBERG.items():
        d.append(
            Dataset(
                f"gutenberg/{name}",
                (_form(f"gutenberg/{file}", sha),),
                f"{_GH}/GITenberg/{repo}/{commit}/{file}",
                "public domain in the USA",
                f"{title}, Project Gutenberg (www.gutenberg.org), public domain in "
                "the USA",
            )
        )
    return {ds.name: ds for ds in d}


def _models() -> dict[str, Dataset]:
    return {
        name: Dataset(
            name,
            (LocalForm(f"gpt2/{file}", sha, size=size),),
            f"{_GPT2}/{file}",
            "MIT",
            _GPT2_CREDIT,
        )
        for name, (file, sha, size) in _GPT2_FILES.items()
    }


DATASETS: dict[str, Dataset] = _registry()
# Released model files (chapter 21): fetched, verified and cached like the data sets,
# but large and needed only where a chapter uses them: not in the offline data folder.
MODELS: dict[str, Dataset] = _models()
GUTENBERG_BOOKS = tuple(_GUTENBERG)
GUTENBERG_TITLES = {name: entry[-1] for name, entry in _GUTENBERG.items()}


def dataset(name: str) -> Dataset:
    """The registry entry for `name` (a data set or a model file)."""
    check_type(name, "name", str, "the str name of a data set")
    known = {**DATASETS, **MODELS}
    if name not in known:
        raise ValueError(
            f"name must be a registered data set ({', '.join(sorted(known))}); "
            f"got {name!r}"
        )
    return known[name]


def attribution(name: str) -> str:
    """The credit line to show wherever the data set is used."""
    return dataset(name).attribution
