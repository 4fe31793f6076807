// @title Bakery Batch Scaler
// @setting tool_use
// @skill api_orchestration
// @difficulty easy
// @hint Fetch the recipe first, scale the amount by guests divided by servings, then feed that number to the converter with the right ingredient.

// Scale a recipe for a crowd and convert cups and spoons into grams with a density-aware converter.
class RecipeScalerEnv extends ToolUseEnv {
  static tools = [
    {
      name: 'get_recipe',
      description: 'A recipe from the bakery binder: servings and ingredients in US units.',
      parameters: {
        type: 'object',
        properties: { name: { type: 'string', description: 'recipe name' } },
        required: ['name'],
      },
    },
    {
      name: 'convert',
      description: 'Convert an amount between units (cup, tbsp, tsp, oz, g, ml). Volume to grams needs the ingredient.',
      parameters: {
        type: 'object',
        properties: {
          amount: { type: 'number' },
          from: { type: 'string', description: 'unit of the amount' },
          to: { type: 'string', description: 'target unit' },
          ingredient: { type: 'string', description: 'needed when converting a volume into grams' },
        },
        required: ['amount', 'from', 'to'],
      },
    },
  ];

  // grams per cup of each ingredient; millilitres per unit of volume
  static DENSITY = { flour: 125, sugar: 200, butter: 227, milk: 245, oats: 90, cocoa: 85, honey: 340 };
  static ML = { cup: 240, tbsp: 15, tsp: 5, ml: 1 };

  reset() {
    const pickOne = (list) => list[Math.floor(Math.random() * list.length)];
    const books = [
      { name: 'Harvest Oat Cookies', extra: 'oats' },
      { name: 'Midnight Cocoa Brownies', extra: 'cocoa' },
      { name: 'Honey Buttermilk Scones', extra: 'honey' },
    ];
    const r = pickOne(books);
    this.serves = pickOne([4, 6, 8]);
    do this.guests = pickOne([6, 9, 10, 12, 15, 18, 20]);
    while (this.guests === this.serves);
    this.recipe = {
      name: r.name,
      serves: this.serves,
      ingredients: [
        { item: 'flour', amount: pickOne([1.5, 2, 2.25, 2.5, 3]), unit: 'cup' },
        { item: 'butter', amount: pickOne([4, 6, 8, 10]), unit: 'tbsp' },
        { item: 'sugar', amount: pickOne([0.5, 0.75, 1]), unit: 'cup' },
        { item: r.extra, amount: pickOne([2, 3, 4]), unit: 'tbsp' },
        { item: 'salt', amount: pickOne([0.5, 1]), unit: 'tsp' },
      ],
    };
    this.asked = ['flour', pickOne(['butter', r.extra])];
    return this.start(
      'You run the Saturday baking class. Today the class bakes ' +
        r.name +
        ' for ' +
        this.guests +
        ' people, and the kitchen scale only shows grams.',
      this.asked.map(
        (item) =>
          'How many grams of ' + item + ' are needed for ' + this.guests + ' people? Round to the nearest gram.',
      ),
    );
  }

  get_recipe(args) {
    const q = typeof args.name === 'string' ? args.name.trim().toLowerCase() : '';
    if (!q) throw new Error('"name" must be a non-empty string');
    if (!this.recipe.name.toLowerCase().includes(q) && !q.includes(this.recipe.name.toLowerCase()))
      throw new Error('no recipe called "' + args.name + '" in the binder; try "' + this.recipe.name + '"');
    return this.recipe;
  }

  convert(args) {
    const amount = Number(args.amount);
    if (args.amount === undefined || args.amount === null || !Number.isFinite(amount) || amount < 0)
      throw new Error('"amount" must be a non-negative number');
    const unit = (u, key) => {
      const s = typeof u === 'string' ? u.trim().toLowerCase().replace(/s$/, '') : '';
      const alias = { tablespoon: 'tbsp', teaspoon: 'tsp', gram: 'g', ounce: 'oz', millilitre: 'ml', milliliter: 'ml' };
      const v = alias[s] || s;
      if (!['cup', 'tbsp', 'tsp', 'oz', 'g', 'ml'].includes(v))
        throw new Error('"' + key + '" must be one of cup, tbsp, tsp, oz, g, ml');
      return v;
    };
    const from = unit(args.from, 'from');
    const to = unit(args.to, 'to');
    const ML = RecipeScalerEnv.ML;
    const grams = (u) => u === 'g' || u === 'oz';
    let value;
    if (grams(from) === grams(to)) {
      value = grams(from)
        ? (amount * (from === 'oz' ? 28.35 : 1)) / (to === 'oz' ? 28.35 : 1)
        : (amount * ML[from]) / ML[to];
    } else {
      const ing = typeof args.ingredient === 'string' ? args.ingredient.trim().toLowerCase() : '';
      const dens = RecipeScalerEnv.DENSITY[ing];
      if (!dens)
        throw new Error(
          'converting between volume and weight needs "ingredient", one of ' +
            Object.keys(RecipeScalerEnv.DENSITY).join(', '),
        );
      const perMl = dens / ML.cup;
      value = grams(from)
        ? (amount * (from === 'oz' ? 28.35 : 1)) / perMl / ML[to]
        : (amount * ML[from] * perMl) / (to === 'oz' ? 28.35 : 1);
    }
    return amount + ' ' + from + ' = ' + Math.round(value * 10) / 10 + ' ' + to;
  }

  need(item) {
    const ing = this.recipe.ingredients.find((i) => i.item === item);
    const scaled = (ing.amount * this.guests) / this.serves;
    return {
      scaled,
      unit: ing.unit,
      grams: (scaled * RecipeScalerEnv.ML[ing.unit] * RecipeScalerEnv.DENSITY[item]) / 240,
    };
  }

  checkAnswer(answer, stage) {
    const m = /\d+(\.\d+)?/.exec(answer.replace(/,/g, ''));
    const want = this.need(this.asked[stage]).grams;
    return m !== null && Math.abs(Number(m[0]) - want) <= Math.max(2, want * 0.02);
  }

  solution() {
    const call = (name, args) => '<tool_call>' + JSON.stringify({ name, arguments: args }) + '</tool_call>';
    const out = [call('get_recipe', { name: this.recipe.name })];
    for (const item of this.asked) {
      const n = this.need(item);
      const amount = Math.round(n.scaled * 10000) / 10000;
      out.push(call('convert', { amount, from: n.unit, to: 'g', ingredient: item }));
      out.push('<answer>' + Math.round(n.grams) + '</answer>');
    }
    return out;
  }
}
