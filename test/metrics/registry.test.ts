// The registry's series names: one series per label set whatever order the labels come in,
// label values escaped as the text format requires, and still right past the rendering cache's bound.
import { expect, test } from 'bun:test'
import { Counter, Histogram } from '../../src/metrics/registry.ts'

test('the same labels in any order count in one series, escaped for the text format', () => {
  const counter = new Counter('svc_test_total', 'test')
  counter.inc({ route: '/v1/x', status: '200' })
  counter.inc({ status: '200', route: '/v1/x' })
  counter.inc({ route: 'a"b\\c\nd', status: '500' }, 3)
  expect(counter.render().slice(2)).toEqual([
    'svc_test_total{route="/v1/x",status="200"} 2',
    'svc_test_total{route="a\\"b\\\\c\\nd",status="500"} 3',
  ])
})

test('label sets past the rendering cache are still counted apart and rendered right', () => {
  const histogram = new Histogram('svc_test_seconds', 'test', [1])
  for (let i = 0; i < 20_050; i++) histogram.observe({ route: `r${i}` }, 0.5)
  histogram.observe({ route: 'r20049' }, 2)
  const lines = histogram.render()
  expect(lines).toContain('svc_test_seconds_bucket{route="r20049",le="1"} 1')
  expect(lines).toContain('svc_test_seconds_bucket{route="r20049",le="+Inf"} 2')
  expect(lines).toContain('svc_test_seconds_count{route="r20049"} 2')
  expect(lines.filter((l) => l.startsWith('svc_test_seconds_count{'))).toHaveLength(20_050)
})
