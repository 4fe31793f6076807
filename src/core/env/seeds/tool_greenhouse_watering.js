// @title Greenhouse Watering Round
// @setting tool_use
// @skill state_modification
// @difficulty easy
// @hint List the beds, read every sensor before touching a valve, and water only the beds that are below the threshold.

// A greenhouse controller: read soil sensors and open the watering valve for exactly the dry beds.
class GreenhouseWateringEnv extends ToolUseEnv {
  static tools = [
    {
      name: 'list_beds',
      description: 'Names of the planting beds in the greenhouse.',
      parameters: { type: 'object', properties: {} },
    },
    {
      name: 'read_moisture',
      description: 'Soil moisture of one bed, in percent.',
      parameters: { type: 'object', properties: { bed: { type: 'string' } }, required: ['bed'] },
    },
    {
      name: 'water',
      description: 'Run one watering cycle on a bed (raises its moisture by about 25 points).',
      parameters: { type: 'object', properties: { bed: { type: 'string' } }, required: ['bed'] },
    },
  ];

  reset() {
    const rnd = (n) => Math.floor(Math.random() * n);
    const all = ['Tomatoes', 'Basil', 'Peppers', 'Lettuce', 'Strawberries', 'Cucumbers', 'Chillies', 'Mint'];
    this.beds = [];
    while (this.beds.length < 4) this.beds.push(all.splice(rnd(all.length), 1)[0]);
    const dry = 1 + rnd(2);
    const order = [0, 1, 2, 3];
    for (let i = 3; i > 0; i--) {
      const j = rnd(i + 1);
      [order[i], order[j]] = [order[j], order[i]];
    }
    this.moisture = {};
    this.cycles = {};
    this.beds.forEach((b, i) => {
      this.moisture[b] = order.indexOf(i) < dry ? 8 + rnd(21) : 30 + rnd(45);
      this.cycles[b] = 0;
    });
    this.dry = this.beds.filter((b) => this.moisture[b] < 30);
    return this.start(
      'You are minding a community greenhouse while the gardener is away. Her note says: "Overwatering rots the roots, so never water a bed that is already moist enough."',
      'Water every bed whose soil moisture is below 30%, exactly once each, and no other bed. Answer "done" when finished.',
    );
  }

  bed(v) {
    const b = typeof v === 'string' ? this.beds.find((x) => x.toLowerCase() === v.trim().toLowerCase()) : null;
    if (!b) throw new Error('unknown bed ' + JSON.stringify(v) + '; use list_beds to see the names');
    return b;
  }

  list_beds() {
    return this.beds;
  }

  read_moisture(args) {
    const b = this.bed(args.bed);
    return b + ': ' + this.moisture[b] + '% moisture';
  }

  water(args) {
    const b = this.bed(args.bed);
    this.cycles[b]++;
    this.moisture[b] = Math.min(100, this.moisture[b] + 25);
    return 'Valve opened for ' + b + '. Watering cycle ' + this.cycles[b] + ' complete.';
  }

  checkAnswer(answer) {
    if (!/done|finished|complete/i.test(answer)) return false;
    return this.beds.every((b) => this.cycles[b] === (this.dry.includes(b) ? 1 : 0));
  }

  solution() {
    const call = (name, args) => '<tool_call>' + JSON.stringify({ name, arguments: args }) + '</tool_call>';
    return [
      call('list_beds', {}),
      ...this.beds.map((bed) => call('read_moisture', { bed })),
      ...this.dry.map((bed) => call('water', { bed })),
      '<answer>done</answer>',
    ];
  }
}
