// Bar charts with Chart.js on canvas: only the parts the pages use are registered. Chart.js sizes
// its canvas through the CSSOM (allowed by style-src 'self') and injects no stylesheet.
import { BarController, BarElement, CategoryScale, Chart, Legend, LinearScale, Tooltip } from 'chart.js'

Chart.register(BarController, BarElement, CategoryScale, LinearScale, Legend, Tooltip)

const drawn = new WeakMap<HTMLCanvasElement, Chart>()

export const COLORS = ['#2563eb', '#16a34a', '#d97706', '#9333ea', '#dc2626', '#0891b2', '#4b5563']

export interface Series {
  label: string
  data: number[]
  colors?: string[]
}

/**
 * Draws (or redraws) a bar chart on `canvas`; `summary` is what a screen reader hears instead of
 * the picture, and `format` labels the values in tooltips and on the axis.
 */
export function barChart(
  canvas: HTMLCanvasElement,
  labels: string[],
  series: Series[],
  summary: string,
  format: (value: number) => string,
  stacked = false,
) {
  drawn.get(canvas)?.destroy()
  canvas.setAttribute('role', 'img')
  canvas.setAttribute('aria-label', summary)
  const chart = new Chart(canvas, {
    type: 'bar',
    data: {
      labels,
      datasets: series.map((s, i) => ({
        label: s.label,
        data: s.data,
        backgroundColor: s.colors ?? COLORS[i % COLORS.length],
      })),
    },
    options: {
      animation: false,
      responsive: true,
      maintainAspectRatio: true,
      // Wide and low on a desktop, taller on a phone.
      aspectRatio: window.innerWidth < 600 ? 1.5 : 3,
      plugins: {
        legend: { display: series.length > 1 },
        tooltip: { callbacks: { label: (item) => `${item.dataset.label}: ${format(Number(item.raw))}` } },
      },
      scales: {
        x: { stacked },
        y: { stacked, beginAtZero: true, ticks: { callback: (value) => format(Number(value)) } },
      },
    },
  })
  drawn.set(canvas, chart)
  return chart
}

/** Wipes every chart under `root`, picture and spoken summary both (a sign-out). */
export function eraseCharts(root: Element) {
  for (const canvas of root.querySelectorAll('canvas')) {
    drawn.get(canvas)?.destroy()
    drawn.delete(canvas)
    canvas.removeAttribute('aria-label')
  }
}
