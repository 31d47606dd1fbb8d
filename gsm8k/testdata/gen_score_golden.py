# Regenerates score_golden.jsonl: random GSM8K-like responses scored by a
# plain-Python copy of lm-eval's RegexFilter + exact_match (Python's re, the
# task YAMLs' regexes and regexes_to_ignore). Run: python3 gen_score_golden.py
import json, random, re

STRICT = {"lm-eval": (r"#### (\-?[0-9\.\,]+)", 0),
          "inferencex": (r"#### (\-?[0-9\.\,]+)", -1),
          "cot": (r"The answer is (\-?[0-9\.\,]+).", 0)}
FLEX = (r"(-?[$0-9.,]{2,})|(-?[0-9]+)", -1)
IGNORE = [",", "\\$", "(?s).*#### ", "\\.$"]


def regex_filter(pat, sel, resp):
    m = re.compile(pat).findall(resp)
    if not m:
        return "[invalid]"
    m = m[sel]
    if isinstance(m, tuple):
        m = [x for x in m if x]
        m = m[0] if m else "[invalid]"
    return m.strip()


def norm(x):
    for s in IGNORE:
        x = re.sub(s, "", x)
    return x.lower()


PIECES = ["#### ", "####", "The answer is ", " ", "\n", ".", ",", "$", "-", "x",
          "0", "1", "2", "5", "7", "42", "1,000", "18.00", "Answer: ", "A"]
rnd = random.Random(20240607)
with open("score_golden.jsonl", "w") as out:
    for i in range(600):
        mode = rnd.choice(list(STRICT))
        gold = rnd.choice(["#### 42", "#### 1,000", "#### -5", "#### 18", "7", "#### 2.5",
                           "blah\n#### 42.\n", "#### 0", "#### 1000"])
        noise = lambda: "".join(rnd.choice(PIECES) for _ in range(rnd.randint(0, 6)))
        if rnd.random() < 0.5:
            resp = "".join(rnd.choice(PIECES) for _ in range(rnd.randint(0, 14)))
        else:
            # Structured: noise, a cue, a variant of the gold number, noise.
            num = gold.split("####")[-1].strip()
            num = rnd.choice([num, num.replace(",", ""), "$" + num, num + ".", num + "\n",
                              num + ".\n", num + ",", num + "00"])
            cue = rnd.choice(["#### ", "The answer is ", "", "Answer: ", "####"])
            resp = noise() + cue + num + noise()
        ref = gold.split("####")[-1].strip() if mode == "cot" and "####" in gold else gold
        s = regex_filter(*STRICT[mode], resp)
        f = regex_filter(*FLEX, resp)
        out.write(json.dumps({"mode": mode, "response": resp, "gold": gold,
                              "strict_extracted": s, "flexible_extracted": f,
                              "strict_match": norm(s) == norm(ref),
                              "flexible_match": norm(f) == norm(ref)}) + "\n")
