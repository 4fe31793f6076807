// @title Stormy Skies Forecast Service
// @setting tool_use
// @skill error_recovery
// @difficulty medium
// @hint Read each error message closely: some failures go away if you simply repeat the request, others need a different input.

// A flaky weather API: a rate limit on the first request and one station down for maintenance.
class FlakyWeatherEnv extends ToolUseEnv {
  static tools = [
    {
      name: 'find_stations',
      description: 'List the weather stations of a city (station codes and names).',
      parameters: {
        type: 'object',
        properties: { city: { type: 'string', description: 'city name, e.g. "Bergen"' } },
        required: ['city'],
      },
    },
    {
      name: 'get_forecast',
      description: 'Forecast of one station for one day: high and low in °C and a summary.',
      parameters: {
        type: 'object',
        properties: {
          station: { type: 'string', description: 'a station code from find_stations' },
          day: { type: 'string', description: 'weekday name, e.g. "Friday"' },
        },
        required: ['station', 'day'],
      },
    },
  ];

  reset() {
    const rnd = (n) => Math.floor(Math.random() * n);
    const cities = ['Bergen', 'Galway', 'Hobart', 'Valparaiso', 'Tromso', 'Wellington', 'Aberdeen', 'Reykjavik'];
    const spots = ['Harbour', 'Airport', 'Hilltop', 'Old Town', 'University', 'Lighthouse'];
    const days = ['Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday', 'Sunday'];
    const skies = ['light rain', 'sunny spells', 'overcast', 'gusty showers', 'clear', 'drizzle', 'fog until noon'];
    this.city = cities[rnd(cities.length)];
    const a = spots.splice(rnd(spots.length), 1)[0];
    const b = spots[rnd(spots.length)];
    const code = (s) => this.city.slice(0, 3).toUpperCase() + '-' + s.replace(' ', '').slice(0, 3).toUpperCase();
    this.stations = [
      { code: code(a), name: this.city + ' ' + a },
      { code: code(b), name: this.city + ' ' + b },
    ];
    this.offline = rnd(2);
    this.good = this.stations[1 - this.offline].code;
    const first = rnd(7);
    this.days = [0, 1, 2, 3, 4].map((i) => days[(first + i) % 7]);
    this.forecast = {};
    for (const d of this.days) {
      const low = rnd(12) - 2;
      this.forecast[d] = { high_c: low + 3 + rnd(9), low_c: low, summary: skies[rnd(skies.length)] };
    }
    this.day = this.days[1 + rnd(4)];
    this.calls = 0;
    return this.start(
      'You are planning a coastal hike and rely on the Stormy Skies forecast service. It covers ' +
        this.days.join(', ') +
        '. The service is known to be unreliable today, so expect errors.',
      'What is the forecast high temperature in ' + this.city + ' on ' + this.day + '? Answer in °C as a number.',
    );
  }

  find_stations(args) {
    if (typeof args.city !== 'string' || !args.city.trim()) throw new Error('"city" must be a non-empty string');
    if (args.city.trim().toLowerCase() !== this.city.toLowerCase())
      throw new Error('HTTP 404: no stations registered for "' + args.city.trim() + '"');
    return this.stations.map((s) => ({ station: s.code, name: s.name }));
  }

  get_forecast(args) {
    this.calls++;
    if (this.calls === 1) throw new Error('HTTP 429 Too Many Requests: rate limit reached, please retry the request.');
    const code = typeof args.station === 'string' ? args.station.trim().toUpperCase() : '';
    if (!code) throw new Error('"station" must be a station code string; use find_stations to look one up');
    const st = this.stations.find((s) => s.code === code);
    if (!st) throw new Error('HTTP 400: unknown station "' + code + '"; codes look like ' + this.stations[0].code);
    if (st.code !== this.good)
      throw new Error(
        'HTTP 503: station ' + code + ' is offline for maintenance. Another station may be able to help.',
      );
    const day = typeof args.day === 'string' ? args.day.trim().toLowerCase() : '';
    const match = this.days.find((d) => d.toLowerCase() === day);
    if (!match) throw new Error('HTTP 400: "day" must be one of ' + this.days.join(', '));
    return Object.assign({ station: code, day: match }, this.forecast[match]);
  }

  checkAnswer(answer) {
    const m = /-?\d+(\.\d+)?/.exec(answer.replace(/−/g, '-'));
    return m !== null && Number(m[0]) === this.forecast[this.day].high_c;
  }

  solution() {
    const call = (name, args) => '<tool_call>' + JSON.stringify({ name, arguments: args }) + '</tool_call>';
    const ask = call('get_forecast', { station: this.good, day: this.day });
    return [
      call('find_stations', { city: this.city }),
      ask,
      ask,
      '<answer>' + this.forecast[this.day].high_c + '</answer>',
    ];
  }
}
