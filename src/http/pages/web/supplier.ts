import './common.ts'
