// Svelte compiler options (runes everywhere).
export default { compilerOptions: { runes: true } };
