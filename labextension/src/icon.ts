/** The icon of the "SeaStreamer stream file" type: frames on a stream, in JupyterLab's icon colours. */
import { LabIcon } from '@jupyterlab/ui-components';

const svgstr = `<svg xmlns="http://www.w3.org/2000/svg" width="16" viewBox="0 0 24 24">
  <g class="jp-icon3" fill="#616161">
    <rect x="3" y="4" width="5" height="7" rx="1"/>
    <rect x="9.5" y="4" width="5" height="7" rx="1"/>
    <rect x="16" y="4" width="5" height="7" rx="1"/>
    <path d="M2 16.5c2.5-2 5-2 7.5 0s5 2 7.5 0 3.5-1.6 5-1.2v2.2c-1.5-.4-2.6.4-3.9 1.4-3 2.3-6.3 2.3-9.3 0-2-1.6-4-1.6-6.3.2z"/>
  </g>
</svg>`;

export const streamIcon = new LabIcon({ name: 'nbkit-viewer:stream', svgstr });
