/**
 * Every setting of the config (config.ts's CONFIG_SCHEMA) in people's words, for the Settings panel:
 * a label, the unit, and one line on why it matters — no code names, no references to source files.
 * The schema's own `why` (the reason for the default, for developers and `spade config show`) stays
 * in config.ts; the group orders the panel. One table, keyed like CONFIG_SCHEMA, so it can join it.
 */
import type { ConfigKey } from './config.ts';

export const SETTING_GROUPS = [
  'The run',
  'Environments',
  'Playing',
  'Model calls',
  'Safety limits',
  'Training',
] as const;
type SettingGroup = (typeof SETTING_GROUPS)[number];

export interface SettingWords {
  group: SettingGroup;
  label: string;
  /** The unit of a number ("plays", "tokens", "seconds"); absent for choices. */
  unit?: string;
  /** One line: what it changes, in plain words. */
  why: string;
}

export const CONFIG_LABELS: Record<ConfigKey, SettingWords> = {
  preset: {
    group: 'The run',
    label: 'Starting values',
    why: 'laptop keeps each cycle short enough to watch in a browser; paper uses the values of the SPADE paper. Every setting below can still be changed.',
  },
  seed: {
    group: 'The run',
    label: 'Seed',
    why: 'Every random choice of the run follows from it, so the same seed and settings replay the same run.',
  },
  setting: {
    group: 'The run',
    label: 'Kind of environment',
    why: 'Games are text puzzles played with short commands; tool use has the agent call functions, which small models find harder.',
  },
  difficulty: {
    group: 'The run',
    label: 'Difficulty asked of the designer',
    why: 'Medium asks for games that take three or more steps of reasoning about hidden state.',
  },
  skillsPerCycle: {
    group: 'The run',
    label: 'Skills per cycle',
    unit: 'skills',
    why: 'How many of the six skills the designer writes environments for in each cycle; they take turns.',
  },
  envsPerSkill: {
    group: 'Environments',
    label: 'Environments per skill',
    unit: 'environments',
    why: 'The designer is rewarded by comparing its environments for the same skill, so at least two are needed.',
  },
  playsPerEnv: {
    group: 'Playing',
    label: 'Plays per environment',
    unit: 'plays with and without a hint',
    why: 'More plays measure how hard an environment is more precisely, and take longer.',
  },
  maxTurns: {
    group: 'Playing',
    label: 'Moves per game',
    unit: 'moves',
    why: 'A game that is not over after this many moves ends unfinished.',
  },
  envRewardScaleMode: {
    group: 'Training',
    label: "How the designer's reward is weighted",
    why: "fixed uses the weight below; computed weighs the designer's few samples like the agent plays they cost.",
  },
  envRewardScale: {
    group: 'Training',
    label: "Designer reward's weight",
    unit: '×',
    why: "Used when the weighting is fixed: 1 puts the designer's reward on the same scale as the agent's.",
  },
  envRewardScaleCap: {
    group: 'Training',
    label: "Designer reward's largest computed weight",
    unit: '×',
    why: 'Caps the computed weight: much larger weights make training unstable.',
  },
  checks: {
    group: 'Environments',
    label: 'Checks a new environment must pass',
    why: "paper runs the method's checks (it loads, answers bad moves, is deterministic); strict also replays the designer's own solution.",
  },
  maxConsecutiveErrors: {
    group: 'Model calls',
    label: 'Failures in a row before the run stops',
    unit: 'tasks',
    why: 'Several failed tasks in a row usually mean the model or its server is down.',
  },
  repairTurns: {
    group: 'Environments',
    label: 'Repair attempts',
    unit: 'attempts',
    why: 'When an environment fails its checks, the designer is shown why and may fix it this many times.',
  },
  estimator: {
    group: 'Training',
    label: "How the designer's reward is measured",
    why: 'The paper blends how often the agent wins with how much a hint helps (regret); the others are alternatives to compare.',
  },
  designerTemperature: {
    group: 'Model calls',
    label: "Designer's temperature",
    why: 'Higher gives more varied environments; 0.6 follows the paper.',
  },
  hintTemperature: {
    group: 'Model calls',
    label: "Hint writer's temperature",
    why: 'Hints should be focused rather than creative, so lower.',
  },
  agentTemperature: {
    group: 'Model calls',
    label: "Agent's temperature",
    why: 'Higher gives more varied play; 0.6 follows the paper.',
  },
  agentTokenBudget: {
    group: 'Playing',
    label: "Agent's words per game",
    unit: 'tokens',
    why: 'All replies of one game together stay within this; small models need far less than the paper allows.',
  },
  designerMaxTokens: {
    group: 'Environments',
    label: "Designer's longest reply",
    unit: 'tokens',
    why: 'A whole environment in code is about 1,500 tokens.',
  },
  concurrency: {
    group: 'Model calls',
    label: 'Model calls at once',
    unit: 'calls',
    why: 'More calls in flight finish a cycle sooner, if the model or server keeps up.',
  },
  llmValidator: {
    group: 'Environments',
    label: 'Ask the model to review each environment',
    why: 'One more model call per environment; the automatic checks already catch most problems.',
  },
  thinking: {
    group: 'Model calls',
    label: 'Let models think before answering',
    why: 'Qwen3 can write a long hidden reasoning block first; off saves a small model its context and time.',
  },
  excerptWords: {
    group: 'Environments',
    label: 'Text shown to the designer',
    unit: 'words',
    why: 'A passage of the corpus inspires each environment; longer passages leave less room for the reply.',
  },
  memoryCapacity: {
    group: 'Environments',
    label: 'Environments remembered',
    unit: 'environments',
    why: 'Good past environments are shown to the designer as examples; the oldest are forgotten first.',
  },
  sandboxMemoryMiB: {
    group: 'Safety limits',
    label: 'Memory per environment',
    unit: 'MiB',
    why: 'Plenty for a text game; a runaway environment is stopped early.',
  },
  sandboxStackKiB: {
    group: 'Safety limits',
    label: 'Recursion depth per environment',
    unit: 'KiB of stack',
    why: 'Deeper recursion than this is stopped before it can crash the page.',
  },
  resetTimeoutMs: {
    group: 'Safety limits',
    label: 'Time to set up a game',
    unit: 'ms',
    why: 'Setting up may build a puzzle; one second is generous.',
  },
  stepTimeoutMs: {
    group: 'Safety limits',
    label: 'Time per move',
    unit: 'ms',
    why: 'A move only updates the game; taking longer means the code hangs.',
  },
  maxCodeKiB: {
    group: 'Safety limits',
    label: "Largest environment's code",
    unit: 'KiB',
    why: "About the longest code the designer's reply can hold.",
  },
  maxObservationKiB: {
    group: 'Safety limits',
    label: 'Largest thing a game may say',
    unit: 'KiB',
    why: "What a game shows the agent goes into a small model's context, so it is kept short.",
  },
  maxActionKiB: {
    group: 'Safety limits',
    label: 'Longest move',
    unit: 'KiB',
    why: 'A longer move is a runaway reply and is refused before the game sees it.',
  },
  modelCallTimeoutS: {
    group: 'Model calls',
    label: 'Longest model call',
    unit: 'seconds',
    why: 'A long designer reply on a slow model takes minutes; past this the server is taken to be stuck.',
  },
  modelIdleTimeoutS: {
    group: 'Model calls',
    label: 'Longest silence in a reply',
    unit: 'seconds',
    why: 'A working server sends words every few milliseconds; this long a pause means it hangs.',
  },
  maxReplyChars: {
    group: 'Model calls',
    label: 'Longest reply',
    unit: 'characters',
    why: 'Room for the longest useful reply; a reply past it is cut off and the request stopped.',
  },
  trainLr: {
    group: 'Training',
    label: 'Learning rate',
    why: 'How far each training step moves the small adapter that is trained; too high and learning becomes unstable.',
  },
  clipLow: {
    group: 'Training',
    label: 'Lower clip',
    why: 'Limits how much one step may make a sampled reply less likely.',
  },
  clipHigh: {
    group: 'Training',
    label: 'Upper clip',
    why: 'Limits how much one step may make a sampled reply more likely; a little looser lets rare good replies rise.',
  },
  klCoef: {
    group: 'Training',
    label: 'Pull back towards the original model',
    why: '0 for games as in the paper; a little keeps tool use close to the starting model.',
  },
  tisCap: {
    group: 'Training',
    label: 'Correction cap',
    unit: '×',
    why: 'Corrects for differences between the model that played and the one being trained, capped at this factor; 0 turns it off.',
  },
  trainSteps: {
    group: 'Training',
    label: 'Training steps',
    why: 'minibatches takes one step per batch of tokens; batch takes one step per role per cycle, as the reference code does.',
  },
  trainEpochs: {
    group: 'Training',
    label: 'Passes over each cycle',
    unit: 'passes',
    why: 'A second pass teaches more from a slow cycle; the clipping keeps it safe.',
  },
  minibatchTokens: {
    group: 'Training',
    label: 'Tokens per training step',
    unit: 'tokens',
    why: "One step's working memory must fit the GPU.",
  },
  maxGradNorm: {
    group: 'Training',
    label: 'Largest step size',
    why: 'Caps how large one training step can be, the usual 1.',
  },
  envReuse: {
    group: 'Training',
    label: 'Rounds per set of environments',
    unit: 'rounds',
    why: "Each extra round replays the cycle's environments to train the agent again, and takes longer.",
  },
  designerLag: {
    group: 'Training',
    label: "Designer's training delay",
    unit: 'cycles',
    why: 'The designer waits this many cycles so its reward counts every play of its environments.',
  },
  probeEvery: {
    group: 'Training',
    label: 'Test the agent every',
    unit: 'training steps',
    why: 'A fixed set of games measures whether the agent improves; 0 never tests.',
  },
};
