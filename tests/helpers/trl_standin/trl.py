"""Stand-in for TRL's GRPOTrainer and GRPOConfig (tests/unit/scale_out_doc.test.ts), following
`trl/trainer/grpo_trainer.py` at f2cd57710ae3 (v1.10.0.dev0; the same in v1.8.0 and later):

- `environment_factory` is a callable or a dict {name: callable}; with a dict each example's
  `environment` field picks its factory, and that field is not passed to `reset`, every other column is;
- one instance of each factory is made at construction to check it: it must have a callable `reset`;
  its public methods other than `reset` and `get_reward` are its tools, each with a docstring whose
  `Args:` describe its arguments; a `get_reward` method makes the environment a reward source;
- without `reward_funcs` and without any `get_reward`: ValueError("No reward source provided. ...").

`train()` does not generate: for one row per environment id of the dataset it plays, in place of a
model, the tool calls the plan (SPADE_PLAN, a JSON file {env_id: {"seed", "calls": [[tool, *args]]}})
gives for that environment (the row's seed replaced by the plan's), reads each rollout's reward
(get_reward, or the reward_funcs), then calls every callback's on_save once, as after a save at step
`save_steps`. It prints one JSON list: {env_id, environment, seed, reward, observations} per row.
"""
import inspect
import json
import os


class GRPOConfig:
    def __init__(self, output_dir="trainer_output", save_steps=500, **kwargs):
        self.output_dir = output_dir
        self.save_steps = save_steps
        self.__dict__.update(kwargs)


class _State:
    def __init__(self, step):
        self.global_step = step
        self.is_world_process_zero = True


def _tools(instance):
    tools = []
    for name, member in inspect.getmembers(instance, predicate=inspect.ismethod):
        if name in ("reset", "get_reward") or name.startswith("_"):
            continue
        doc = inspect.getdoc(member) or ""
        params = [p for p in inspect.signature(member).parameters]
        if "Args:" not in doc and params:
            raise ValueError(f"Tool {name} has no 'Args:' section in its docstring.")
        for p in params:
            if f"{p}:" not in doc:
                raise ValueError(f"Tool {name}: argument {p} is not described in its docstring.")
        tools.append(name)
    return tools


class GRPOTrainer:
    def __init__(self, model, reward_funcs=None, args=None, train_dataset=None, environment_factory=None,
                 peft_config=None, callbacks=None, **kwargs):
        self.args = args or GRPOConfig()
        self.train_dataset = train_dataset
        self.callbacks = callbacks or []
        self.multi = isinstance(environment_factory, dict)
        self.factories = environment_factory if self.multi else {None: environment_factory}
        self.reward_funcs = [] if reward_funcs is None else (reward_funcs if isinstance(reward_funcs, list) else [reward_funcs])
        self.pools = {}
        self.tools = {}
        reward_types = []
        for name, factory in self.factories.items():
            instance = factory()
            if not callable(getattr(instance, "reset", None)):
                raise ValueError("Each environment instance returned by `environment_factory` must define a callable `reset`.")
            self.tools[name] = _tools(instance)
            self.pools[name] = [instance]
            if callable(getattr(instance, "get_reward", None)) and type(instance) not in reward_types:
                reward_types.append(type(instance))
                self.reward_funcs.append(
                    lambda environments, _t=type(instance), **kw: [e.get_reward() if type(e) is _t else None for e in environments])
        if not self.reward_funcs:
            raise ValueError("No reward source provided. Pass `reward_funcs`, or an `environment_factory` whose environment "
                             "defines a `get_reward` method.")

    def train(self):
        with open(os.environ["SPADE_PLAN"]) as f:
            plan = json.load(f)
        seen, rows = set(), []
        for row in self.train_dataset:
            if row["env_id"] in plan and row["env_id"] not in seen:
                seen.add(row["env_id"])
                rows.append(dict(row, seed=plan[row["env_id"]]["seed"]))
        results, environments = [], []
        used = {}
        for row in rows:
            name = row.get("environment") if self.multi else None
            if name not in self.factories:
                raise ValueError(f"Example has `environment={name!r}`, which is not among the environments passed to "
                                 f"`environment_factory`. Expected one of: {list(self.factories)}.")
            pool = self.pools[name]
            index = used.get(name, 0)
            if index == len(pool):
                pool.append(self.factories[name]())
            used[name] = index + 1
            env = pool[index]
            reset_kwargs = {k: v for k, v in row.items() if k != "environment"} if self.multi else row
            observations = [env.reset(**reset_kwargs)]
            for tool, *tool_args in plan[row["env_id"]]["calls"]:
                if tool not in self.tools[name]:
                    raise ValueError(f"{tool} is not a tool of {name}")
                try:
                    observations.append(getattr(env, tool)(*tool_args))
                except ValueError as err:  # TRL feeds the message back to the model
                    observations.append(str(err))
            environments.append(env)
            results.append({"env_id": row["env_id"], "environment": name, "seed": row["seed"], "observations": observations})
        for func in self.reward_funcs:
            for r, value in zip(results, func(environments=environments)):
                if value is not None:
                    r["reward"] = r.get("reward", 0.0) + value
        state = _State(self.args.save_steps)
        for cb in self.callbacks:
            cb.on_save(self.args, state, None)
        print(json.dumps(results))
