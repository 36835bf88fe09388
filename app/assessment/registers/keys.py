"""The keys names are looked up by, and the romaji they are given.

Lookup keys are normalised so that script and spelling variants meet: Japanese keys are
NFKC, without spaces, katakana folded to hiragana and ヶ to ケ; romaji keys are lower-case
letters only, without diacritics, with long vowels, "oh" and m-before-b/m/p folded.
"""

import functools
import re
import unicodedata

import jaconv

# Official name suffix -> the readings it takes and how each is romanised.
SUFFIX_KANA = {"市": ("し",), "区": ("く",), "町": ("ちょう", "まち"), "村": ("むら", "そん")}
SUFFIX_ROMAJI = {
    "し": "shi",
    "く": "ku",
    "ちょう": "cho",
    "まち": "machi",
    "むら": "mura",
    "そん": "son",
}
SUFFIX_ENGLISH = {"市": "city", "区": "ward", "町": "town", "村": "village"}

_KATAKANA_TO_HIRAGANA = {code: code - 0x60 for code in range(ord("ァ"), ord("ヶ") + 1)}


def ja_key(text: str) -> str:
    """Return the lookup key of Japanese text (kanji, hiragana or katakana)."""
    text = unicodedata.normalize("NFKC", text)
    text = re.sub(r"[\s・]+", "", text).replace("ヶ", "ケ").replace("ヵ", "カ")
    return text.translate(_KATAKANA_TO_HIRAGANA).lower()


def romaji_key(text: str) -> str:
    """Return the lookup key of romaji text, tolerant of macrons and long-vowel spellings."""
    text = unicodedata.normalize("NFKD", text)
    text = "".join(ch for ch in text if not unicodedata.combining(ch)).lower()
    # Word by word, so "Shimamoto-cho Osaka" does not fold into "shimamotochosaka".
    return "".join(_romaji_word(word) for word in re.split(r"[^a-z]+", text))


def _romaji_word(word: str) -> str:
    # ん is written n or m before b/m/p ("Gunma"/"Gumma"); Tohkyoh's long vowels as Tōkyō's.
    return _folded(re.sub(r"oh(?![aeiouy])", "o", re.sub(r"m(?=[bmp])", "n", word)))


def _folded(romaji: str) -> str:
    """Write っち as tch, not cch, and long vowels once: Tōkyō, Toukyou, Tookyoo are tokyo."""
    return re.sub(r"uu+", "u", re.sub(r"o[ou]+", "o", romaji.replace("cch", "tch")))


def is_romaji(text: str) -> bool:
    """Tell whether text is written in Latin letters (macrons allowed)."""
    text = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", text))
    return text.isascii() or all(ch.isascii() or unicodedata.combining(ch) for ch in text)


@functools.cache
def romanise(kana: str) -> str:
    """Return simplified Hepburn for a hiragana reading ("とうきょう" -> "tokyo")."""
    # jaconv's table, not pykakasi: pykakasi keeps a ~100 MiB kanji dictionary alive for
    # the life of the process, and only kana ever reaches this function. Hepburn marks
    # ん before a vowel (Kan'onji) and writes っち as tch (Kutchan).
    # ぢ is written ji, as じ: jaconv reads ぢゃ as "jiya" (三軒茶屋, さんげんぢゃや: Sangenjaya).
    kana = re.sub("ん(?=[あいうえお])", "ん'", kana.replace("ぢ", "じ"))
    return _folded(jaconv.kana2alphabet(kana))


# Kanji that begin a word read with う. Written after の (の, ノ, 之) or after 大 (おお), that う
# starts the next word and is no long vowel, so a name's English keeps it (丸の内, まるのうち:
# Marunouchi, not Marunochi; 大浦, おおうら: Oura). Only where the name writes the の or the 大
# before the kanji: elsewhere the kana alone cannot tell (河内 is こう・ち, Kochi). Only the
# display: keys fold both spellings alike.
WORDS_WITH_U = {"内": "うち", "浦": "うら", "上": "うえ", "海": "うみ", "梅": "うめ", "馬": "うま",
                "牛": "うし", "魚": "うお"}  # fmt: skip
BEFORE_U = {"の": "の", "ノ": "の", "之": "の", "大": "おお"}  # as written: as read


def romanise_name(kana: str, name: str) -> str:
    """Return a name's reading in Hepburn, a word apart where the name writes の or 大 before a
    kanji of WORDS_WITH_U (丸の内: Marunouchi)."""
    cuts = set()
    for before, kanji in zip(name, name[1:], strict=False):
        if before in BEFORE_U and kanji in WORDS_WITH_U:
            read = BEFORE_U[before]
            for match in re.finditer(re.escape(read + WORDS_WITH_U[kanji]), kana):
                cuts.add(match.start() + len(read))
    edges = [0, *sorted(cuts), len(kana)]
    return "".join(romanise(kana[i:j]) for i, j in zip(edges, edges[1:], strict=False) if i < j)


def hiragana(katakana: str) -> str:
    """Return a reading in hiragana, whatever its width or script."""
    return unicodedata.normalize("NFKC", katakana).translate(_KATAKANA_TO_HIRAGANA)
