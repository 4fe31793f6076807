"""Independent reference check of the engine, run on a machine with PyTorch, transformers and PEFT.

For each tiny checkpoint in REF (written by scripts/device/make_refs.ts): Hugging Face transformers'
logits vs ours (CPU references, and the WebGPU engine when gpu_logits.json is present), and PEFT's
logits with our exported adapter vs ours. Then the other direction: PEFT makes an adapter for the
qwen2 checkpoint and saves it with its logits into OUT, for `tests`/scripts here to load.
    python3 scripts/device/check.py .dev/ref OUT
"""
import json
import os
import sys

import numpy as np
import torch
from transformers import AutoModelForCausalLM

ref, out = sys.argv[1], sys.argv[2]
tokens = [int(x) for x in open(f"{ref}/tokens.txt").read().split(",")]
ids = torch.tensor([tokens])


def load(d):
    try:
        return AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager").eval()
    except TypeError:
        return AutoModelForCausalLM.from_pretrained(d, torch_dtype=torch.float32, attn_implementation="eager").eval()


def rel(a, b):
    a = np.asarray(a, dtype=np.float64).reshape(-1)
    b = np.asarray(b, dtype=np.float64).reshape(-1)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-12))


def logits(m):
    with torch.no_grad():
        return m(ids).logits[0].double().numpy()


report = {"torch": torch.__version__}
try:
    import peft
    import transformers

    report["transformers"] = transformers.__version__
    report["peft"] = peft.__version__
    from peft import LoraConfig, PeftModel, get_peft_model
except Exception as e:  # noqa: BLE001
    report["import_error"] = repr(e)

for v in ["llama", "llama3", "qwen2", "qwen3"]:
    d = f"{ref}/{v}"
    r = {}
    try:
        hf = logits(load(d))
        r["cpu_vs_transformers"] = rel(json.load(open(f"{d}/our_logits.json")), hf)
        if os.path.exists(f"{d}/gpu_logits.json"):
            r["gpu_vs_transformers"] = rel(json.load(open(f"{d}/gpu_logits.json"))["logits"], hf)
        pm = PeftModel.from_pretrained(load(d), f"{d}/adapter").eval()
        hfa = logits(pm)
        r["adapter_cpu_vs_peft"] = rel(json.load(open(f"{d}/our_logits_adapter.json")), hfa)
        r["adapter_changes_logits_by"] = rel(hfa, hf)
    except Exception as e:  # noqa: BLE001
        r["error"] = repr(e)[:800]
    report[v] = r

try:
    torch.manual_seed(0)
    cfg = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "down_proj"], init_lora_weights=False)
    pm = get_peft_model(load(f"{ref}/qwen2"), cfg).eval()
    pm.save_pretrained(f"{out}/peft_py")
    json.dump(logits(pm).reshape(-1).tolist(), open(f"{out}/peft_py_logits.json", "w"))
    report["peft_py"] = "saved"
except Exception as e:  # noqa: BLE001
    report["peft_py_error"] = repr(e)[:800]

json.dump(report, open(f"{out}/check.json", "w"), indent=1)
print(json.dumps(report, indent=1))
