"""The code the grader runs in the student's kernel, after the notebook: it calls the student's
functions as a plan says and writes what they return as ``.npy`` files and one JSON file.

This file is sent to the kernel as text (``channel.RUNNER``): the sandbox cannot read the
grader's folder. It imports nothing of the grader and trusts nothing of the kernel either way:
whatever the student's code does to this function, the grader judges only the numbers that
come back, against its own references, in its own process.
"""


def _grader_run(folder, namespace):  # runs in the kernel: no annotation it cannot evaluate
    import json
    import pathlib

    import numpy
    import torch

    root = pathlib.Path(folder)
    plan = json.loads((root / "plan.json").read_text(encoding="utf-8"))
    out = root / "out"
    out.mkdir()
    written = [0]

    def array(name):
        return torch.from_numpy(numpy.load(root / name, allow_pickle=False).copy())

    def detach_inputs(module, inputs):
        return tuple(x.detach() if isinstance(x, torch.Tensor) else x for x in inputs)

    def build(spec, made):
        kind = spec["kind"]
        if kind == "value":
            return spec["value"]
        if kind == "array":
            tensor = array(spec["file"])
            return tensor.to(getattr(torch, spec["dtype"])) if "dtype" in spec else tensor
        if kind in ("tuple", "list"):
            items = [build(item, made) for item in spec["items"]]
            return tuple(items) if kind == "tuple" else items
        if kind == "generator":
            return torch.Generator().manual_seed(spec["seed"])
        if kind == "module":
            import attention_from_scratch

            kwargs = {key: build(value, made) for key, value in spec["kwargs"].items()}
            module = getattr(attention_from_scratch, spec["name"])(**kwargs)
            named = dict(module.named_parameters()) | dict(module.named_buffers())
            with torch.no_grad():
                for key, name in spec["state"].items():
                    named[key].copy_(array(name))
            if spec.get("detached"):
                module.register_forward_pre_hook(detach_inputs)
            return module.train(spec["training"])
        if kind == "result":
            return made[spec["index"]]
        raise ValueError(f"unknown argument kind {kind!r}")

    def export(value, depth=0):
        if depth > 4:
            return {"kind": "other", "type": "a value nested too deep"}
        if isinstance(value, torch.Tensor):
            tensor = value.detach().cpu()
            dtype = str(tensor.dtype)
            if tensor.dtype in (torch.bfloat16, torch.float16):
                tensor = tensor.float()
            written[0] += 1
            name = f"r{written[0]}.npy"
            numpy.save(out / name, tensor.resolve_conj().numpy(), allow_pickle=False)
            return {"kind": "tensor", "file": name, "dtype": dtype}
        if isinstance(value, torch.nn.Module):
            state = {key: export(item, depth + 1) for key, item in value.state_dict().items()}
            training = bool(value.training)
            return {"kind": "module", "name": type(value).__name__, "training": training,
                    "state": state}  # fmt: skip
        if isinstance(value, bool):
            return {"kind": "bool", "value": bool(value)}
        if isinstance(value, int):
            return {"kind": "int", "value": int(value)}
        if isinstance(value, float):
            return {"kind": "float", "value": float(value)}
        if isinstance(value, str):
            return {"kind": "str", "value": str(value)[:2000]}
        if value is None:
            return {"kind": "none"}
        if isinstance(value, tuple | list):
            return {"kind": "list", "items": [export(item, depth + 1) for item in value[:64]]}
        return {"kind": "other", "type": type(value).__name__}

    results = []
    for call in plan["calls"]:
        made = []
        steps = []
        for step in call["steps"]:
            try:
                args = [build(arg, made) for arg in step["args"]]
                kwargs = {key: build(arg, made) for key, arg in step["kwargs"].items()}
                target = step["target"]
                if isinstance(target, int):
                    target = made[target]
                elif target in namespace:
                    target = namespace[target]
                else:
                    raise NameError(f"name {target!r} is not defined in the notebook")
                if step["method"] is not None:
                    target = getattr(target, step["method"])
                value = target(*args, **kwargs) if step["called"] else target
            except Exception as error:  # the student's code may raise anything
                made.append(None)
                message = str(error).splitlines()[0][:300] if str(error) else ""
                steps.append({"raised": {"type": type(error).__name__, "message": message}})
                # A later step would use what this one did not make: the call stops here.
                break
            made.append(value)
            done = {}
            try:
                done["value"] = export(value) if step["send_back"] else {"kind": "none"}
                if step["arguments_after"]:
                    done["arguments"] = [export(arg) for arg in args]
            except Exception as error:
                done = {"raised": {"type": type(error).__name__, "message": str(error)[:300]}}
            steps.append(done)
        results.append({"steps": steps})
    text = json.dumps({"calls": results})
    (out / "results.json").write_text(text, encoding="utf-8")
