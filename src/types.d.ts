// Ambient declarations for modules whose types TypeScript cannot find by itself.
declare module 'comlink/dist/esm/node-adapter.mjs' {
  export { default } from 'comlink/dist/esm/node-adapter';
}

// `import text from './file.wgsl?raw'` (Vite natively; Node through bin/raw_loader.js).
declare module '*?raw' {
  const text: string;
  export default text;
}
